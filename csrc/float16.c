/* float16 <-> float32 conversion on the CPU: NumPy's astype, bit for bit, without its cost.

What: three functions of a CPython extension module, `_float16`:

    from_float32(src, dst)   dst = src.astype(float16): round to nearest even, subnormals
                             kept, overflow to inf, a NaN keeps the top of its payload
    to_float32(src, dst)     dst = src.astype(float32): exact (every float16 is a float32)
    unscale(g, inv) -> bool  g = (g.astype(float32) * inv).astype(float16) in place, and
                             whether a product is not finite in float16 (|p| >= 65520 or
                             NaN): backend/loss_scaling.py's twin for one float16 gradient;
                             for a float32 g, g *= inv and whether a product is inf or NaN

src and dst: C-contiguous buffers of the same length (float32 'f' and float16 'e', or the
other way round; NumPy arrays are such buffers). Both return None; a wrong dtype, length or
layout raises TypeError or ValueError before anything is written.

Why: NumPy converts float16 one element at a time in a scalar loop (2.5 ns an element to
float32, 4.7 from it, and about 100 ns for a float32 value rounding into float16's subnormals,
2-core CPU). An eager AMP step on the CPU converts 35 to 40 times (the float16 GEMM twin widens
its operands and rounds its product), and those conversions were a fifth of its host time.
Here each element is a few integer operations with no branch, which the compiler vectorizes
(8 elements a step with AVX2), at the same cost for every value.

Caller: minitorch_amp/backend/host_float16.py compiles this file at first use (cc -O3, into a
cache folder) and backend/cast.py's `convert` calls it for NumPy float16 <-> float32. The
twin, the definition these functions must match bit for bit, is NumPy's `astype`
(tests/test_host_float16.py: every float16 value, every float32 rounding edge, random bits);
`_float16_bits` in backend/cast.py is the same rounding written in NumPy passes.

The arithmetic is on integers, but for one float32 product whose operands and result are
normal and whose result is exact: the floating-point environment (rounding mode, flush to
zero) cannot change a result.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* Clones for AVX2 and the baseline on x86-64 Linux: the loader picks one at load time, so the
   same compiled file runs on any x86-64 (AVX2's variable shifts vectorize the rounding). */
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
#define CLONES __attribute__((target_clones("avx2", "default"), visibility("hidden")))
#else
#define CLONES
#endif

/* float32 bits -> float16 bits */
static inline uint16_t half_from_single(uint32_t u) {
    uint32_t a = u & 0x7FFFFFFFu; /* the magnitude */
    /* A normal result: re-bias the exponent (127 -> 15: minus 0x38000000, here plus its
       two's complement), add 0x0FFF plus the last kept bit (a tie goes to even), drop 13 bits.
       A carry runs into the exponent; 65520 and above reach 0x7C00 (inf) or more. */
    uint32_t h = (a + 0xC8000FFFu + ((a >> 13) & 1u)) >> 13;
    /* A subnormal result (a below 2**-14): the significand with its leading 1, shifted right
       to count units of 2**-24, rounded to nearest even by what was shifted out. */
    uint32_t shift = 126u - (a >> 23);          /* 14 at 2**-15 .. 24 at 2**-25 */
    shift = shift > 31u ? 31u : shift;          /* below 2**-25 (and wrapped): zero */
    shift = shift < 14u ? 14u : shift;          /* (the normal lane's values: unused) */
    uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
    uint32_t q = m >> shift;
    uint32_t rest = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    q += (rest > half) | ((rest == half) & q);  /* above half, or a tie with an odd q */
    q = a == 0u ? 0u : q;
    h = a < 0x38800000u ? q : h;
    h = h > 0x7C00u ? 0x7C00u : h;              /* overflow, inf: inf */
    /* NaN: the payload's top 10 bits, and never 0 (that would be inf) */
    uint32_t payload = (a >> 13) & 0x3FFu;
    payload |= payload == 0u;
    h = a > 0x7F800000u ? (0x7C00u | payload) : h;
    return (uint16_t)(h | ((u >> 16) & 0x8000u));
}

/* float16 bits -> float32 bits */
static inline uint32_t single_from_half(uint16_t bits) {
    uint32_t h = bits;
    uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    uint32_t normal = ((e + 112u) << 23) | (m << 13);  /* exponent 15 -> 127 */
    uint32_t special = 0x7F800000u | (m << 13);        /* inf, NaN with its payload */
    /* zero and subnormals: m * 2**-24, exact in float32 (m < 1024, the product normal) */
    float tiny = (float)m * 0x1p-24f;
    uint32_t subnormal;
    __builtin_memcpy(&subnormal, &tiny, sizeof subnormal);
    uint32_t is_zero = -(uint32_t)(e == 0u), is_special = -(uint32_t)(e == 31u);  /* masks */
    uint32_t r = (subnormal & is_zero) | (special & is_special) | (normal & ~(is_zero | is_special));
    return ((h & 0x8000u) << 16) | r;
}

/* The loops take untyped pointers, so that one wrapper (convert) calls either. */
CLONES void from_float32_loop(const void *restrict src, void *restrict dst, Py_ssize_t n) {
    const uint32_t *in = src;
    uint16_t *out = dst;
    for (Py_ssize_t i = 0; i < n; ++i) out[i] = half_from_single(in[i]);
}

CLONES void to_float32_loop(const void *restrict src, void *restrict dst, Py_ssize_t n) {
    const uint16_t *in = src;
    uint32_t *out = dst;
    for (Py_ssize_t i = 0; i < n; ++i) out[i] = single_from_half(in[i]);
}

/* Below this many elements the GIL stays held: releasing it costs more than the loop. */
#define RELEASE_GIL_FROM 65536

/* Get src (format src_format) and dst (dst_format, writable), C-contiguous, of one length. */
static int get_buffers(PyObject *args, Py_buffer *src, const char *src_format, Py_buffer *dst,
                       const char *dst_format) {
    PyObject *src_obj, *dst_obj;
    if (!PyArg_ParseTuple(args, "OO", &src_obj, &dst_obj)) return -1;
    if (PyObject_GetBuffer(src_obj, src, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    if (PyObject_GetBuffer(dst_obj, dst, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE)
        < 0) {
        PyBuffer_Release(src);
        return -1;
    }
    const char *problem = NULL;
    if (strcmp(src->format, src_format) != 0 || strcmp(dst->format, dst_format) != 0)
        problem = "dtypes";
    else if (src->len / src->itemsize != dst->len / dst->itemsize)
        problem = "lengths";
    if (problem) {
        PyErr_Format(problem[0] == 'd' ? PyExc_TypeError : PyExc_ValueError,
                     "_float16: src must be '%s' and dst '%s' of the same length; got '%s' "
                     "(%zd elements) and '%s' (%zd)", src_format, dst_format, src->format,
                     src->len / src->itemsize, dst->format, dst->len / dst->itemsize);
        PyBuffer_Release(src);
        PyBuffer_Release(dst);
        return -1;
    }
    return 0;
}

/* src (src_format) converted into dst (dst_format) by loop */
static PyObject *convert(PyObject *args, const char *src_format, const char *dst_format,
                         void (*loop)(const void *restrict, void *restrict, Py_ssize_t)) {
    Py_buffer src, dst;
    if (get_buffers(args, &src, src_format, &dst, dst_format) < 0) return NULL;
    Py_ssize_t n = src.len / src.itemsize;
    if (n >= RELEASE_GIL_FROM) {
        Py_BEGIN_ALLOW_THREADS
        loop(src.buf, dst.buf, n);
        Py_END_ALLOW_THREADS
    } else {
        loop(src.buf, dst.buf, n);
    }
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    Py_RETURN_NONE;
}

static PyObject *from_float32(PyObject *self, PyObject *args) {
    (void)self;
    return convert(args, "f", "e", from_float32_loop);
}

static PyObject *to_float32(PyObject *self, PyObject *args) {
    (void)self;
    return convert(args, "e", "f", to_float32_loop);
}

/* g = float16(float32(g) * inv) in place; whether a product is not finite in float16 (its
   magnitude at or above 65520, which rounds to inf, or NaN) */
CLONES int unscale_loop(uint16_t *restrict g, float inv, Py_ssize_t n) {
    int bad = 0;
    for (Py_ssize_t i = 0; i < n; ++i) {
        uint32_t wide_bits = single_from_half(g[i]);
        float wide;
        memcpy(&wide, &wide_bits, 4);
        wide *= inv;
        bad |= !(fabsf(wide) < 65520.0f);
        memcpy(&wide_bits, &wide, 4);
        g[i] = half_from_single(wide_bits);
    }
    return bad;
}

/* g = g * inv in place, float32; whether a product is not finite */
CLONES int unscale32_loop(float *restrict g, float inv, Py_ssize_t n) {
    int bad = 0;
    for (Py_ssize_t i = 0; i < n; ++i) {
        float p = g[i] * inv;
        bad |= !(fabsf(p) <= 3.4028234663852886e38f); /* inf or NaN */
        g[i] = p;
    }
    return bad;
}

static PyObject *unscale(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *g_obj;
    float inv;
    if (!PyArg_ParseTuple(args, "Of", &g_obj, &inv)) return NULL;
    Py_buffer g;
    if (PyObject_GetBuffer(g_obj, &g, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0)
        return NULL;
    int half = strcmp(g.format, "e") == 0;
    if (!half && strcmp(g.format, "f") != 0) {
        PyErr_Format(PyExc_TypeError,
                     "_float16.unscale: g must be float16 ('e') or float32 ('f'), got '%s'",
                     g.format);
        PyBuffer_Release(&g);
        return NULL;
    }
    int bad;
    Py_BEGIN_ALLOW_THREADS
    bad = half ? unscale_loop(g.buf, inv, g.len / 2) : unscale32_loop(g.buf, inv, g.len / 4);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&g);
    return PyBool_FromLong(bad);
}

static PyMethodDef methods[] = {
    {"from_float32", from_float32, METH_VARARGS,
     "from_float32(src, dst): dst (float16) = src (float32) rounded to nearest even"},
    {"to_float32", to_float32, METH_VARARGS,
     "to_float32(src, dst): dst (float32) = src (float16), exactly"},
    {"unscale", unscale, METH_VARARGS,
     "unscale(g, inv) -> bool: g = g * inv (in float32, rounded to g's dtype) in place; any "
     "not finite"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_float16", "float16 <-> float32 conversion, NumPy's bits", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__float16(void) { return PyModule_Create(&module); }
