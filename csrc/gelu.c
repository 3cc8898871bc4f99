/* Exact GELU on the CPU: NumPy's float32 passes, fused into one loop, bit for bit.

What: four functions of a CPython extension module, `_gelu`, on C-contiguous float32 buffers:

    forward(x, body, split, tail, clip, t_scale, cdf, out, exponent, g) -> k
        Phi(x) into cdf and x * Phi(x) into out, as backend/special.py's `_normal_cdf_block`
        computes them: 1/2 + x * R(s), s = x*x, R the polynomial whose coefficients `body`
        holds (constant term first), by Horner's rule from the top, one rounding per
        operation. k counts the tail's elements, s >= split (NaN is not one), where that is
        not Phi: for each 512-element chunk holding one, exponent = (a*a) * -0.5 and g = G(t)
        on the whole chunk (`_normal_cdf_tail`'s operations), a = min(|x|, clip), t = 1 / (a *
        t_scale + 1), G the polynomial of `tail` (powers 1 up); when k > 0, both are 0 in the
        other chunks. The caller then takes NumPy's exp of exponent and calls tail_finish.
    tail_finish(x, split, g, e, cdf, out)
        where x*x >= split: p = g * e (Phi(-|x|)), cdf = x > 0 ? 1 - p : p, out = x * cdf
    density_exponent(x, s)   s = (x * x) * -0.5                       (then NumPy's exp)
    slope(s, x, cdf, grad, c)
                             s = (((s * c) * x) + cdf) * grad in place, c = 1/sqrt(2 pi):
                             the gradient of x * Phi(x), given s = exp(-x*x / 2)

The constants (coefficients, split, clip, scales) come from the caller as float32: one source.
A wrong dtype or length raises TypeError or ValueError before anything is written.

Why: backend/special.py and autograd/ops/activation.py compute exact GELU with NumPy passes
over cache-sized blocks: 17 for the forward, 8 for the backward, each reading and writing the
block. A transformer's MLP activation ([16, 64, 512] in the example GPT) took 3.8 ms forward
and backward on the 2-core CPU against PyTorch's 1.35 (its one fused loop). Here the same
operations run element by element in one loop (the exponential stays NumPy's, so the bits
stay NumPy's).

Bits: float32 multiplies and adds are correctly rounded in C as in NumPy; the loader compiles
with -ffp-contract=off (no fused multiply-add) and without -ffast-math (no reordering), so each
operation, in the same order, rounds as NumPy's does. tests/test_host_gelu.py holds the
results to the NumPy passes bit for bit (backend/special.py's `_normal_cdf_block` and the
backward's loop are the definition, and the path without a C compiler).

Caller: backend/host_gelu.py (compiled by backend/host_c.py at first use).
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
#define CLONES __attribute__((target_clones("avx2", "default"), visibility("hidden")))
#else
#define CLONES
#endif

#define MAX_TERMS 16
#define CHUNK 512 /* elements a chunk: its x, s and y stay in the L1 cache */

/* Horner's rule a coefficient at a time over a chunk (the inner loops vectorize), where a
   loop per element over the coefficients would not. */
struct tail {
    const float *coefs; /* G's coefficients of t**1 .. t**terms */
    int terms;
    float clip, t_scale;
    float *exponent, *g;
};

CLONES Py_ssize_t forward_loop(const float *restrict x, const float *restrict body,
                                      int terms, float split, struct tail tail,
                                      float *restrict cdf, float *restrict out, Py_ssize_t n) {
    Py_ssize_t k = 0;
    float s[CHUNK];
    for (Py_ssize_t start = 0; start < n; start += CHUNK) {
        Py_ssize_t m = n - start < CHUNK ? n - start : CHUNK;
        const float *xc = x + start;
        float *y = cdf + start, *e = tail.exponent + start, *g = tail.g + start;
        Py_ssize_t here = 0;
        for (Py_ssize_t i = 0; i < m; ++i) {
            s[i] = xc[i] * xc[i];
            y[i] = s[i] * body[terms - 1];
            here += s[i] >= split;
        }
        for (int j = terms - 2; j > 0; --j) {
            float c = body[j];
            for (Py_ssize_t i = 0; i < m; ++i) {
                float t = y[i] + c;
                y[i] = t * s[i];
            }
        }
        float c0 = body[0];
        for (Py_ssize_t i = 0; i < m; ++i) {
            float t = y[i] + c0;
            t *= xc[i];
            t += 0.5f;
            y[i] = t;
            out[start + i] = xc[i] * t;
        }
        k += here;
        if (!here) continue; /* zeroed at the end if another chunk has a tail */
        /* the tail's formula on the whole chunk, branch-free (only the tail's lanes are kept) */
        float t[CHUNK];
        for (Py_ssize_t i = 0; i < m; ++i) {
            float a = fabsf(xc[i]);
            a = a < tail.clip ? a : tail.clip;
            e[i] = (a * a) * -0.5f;
            float u = a * tail.t_scale;
            u += 1.0f;
            t[i] = 1.0f / u;
            g[i] = t[i] * tail.coefs[tail.terms - 1];
        }
        for (int j = tail.terms - 2; j >= 0; --j) {
            float c = tail.coefs[j];
            for (Py_ssize_t i = 0; i < m; ++i) {
                float v = g[i] + c;
                g[i] = v * t[i];
            }
        }
    }
    if (k) /* exp and tail_finish will read every exponent and g: 0 where there is no tail */
        for (Py_ssize_t start = 0; start < n; start += CHUNK) {
            Py_ssize_t m = n - start < CHUNK ? n - start : CHUNK, here = 0;
            for (Py_ssize_t i = 0; i < m; ++i) here += x[start + i] * x[start + i] >= split;
            if (!here) {
                memset(tail.exponent + start, 0, m * sizeof(float));
                memset(tail.g + start, 0, m * sizeof(float));
            }
        }
    return k;
}

/* At the tail's elements (x*x >= split), given e = exp(exponent): Phi(-|x|) = G(t) * e, and
   cdf = x > 0 ? 1 - Phi(-|x|) : Phi(-|x|) (no 1/2 - (1/2 - p) cancellation); out = x * cdf. */
CLONES void tail_finish_loop(const float *restrict x, float split,
                                    const float *restrict g, const float *restrict e,
                                    float *restrict cdf, float *restrict out, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; ++i) {
        float p = g[i] * e[i], q = 1.0f - p;
        /* selects on the bits, so that the loop has no branch and vectorizes */
        uint32_t pb, qb, cb, ob;
        memcpy(&pb, &p, 4);
        memcpy(&qb, &q, 4);
        memcpy(&cb, &cdf[i], 4);
        memcpy(&ob, &out[i], 4);
        uint32_t positive = -(uint32_t)(x[i] > 0.0f), in_tail = -(uint32_t)(x[i] * x[i] >= split);
        uint32_t yb = (qb & positive) | (pb & ~positive);
        float y, o;
        memcpy(&y, &yb, 4);
        o = x[i] * y;
        uint32_t o_bits;
        memcpy(&o_bits, &o, 4);
        cb = (yb & in_tail) | (cb & ~in_tail);
        ob = (o_bits & in_tail) | (ob & ~in_tail);
        memcpy(&cdf[i], &cb, 4);
        memcpy(&out[i], &ob, 4);
    }
}

CLONES void exponent_loop(const float *restrict x, float *restrict s, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; ++i) {
        float t = x[i] * x[i];
        s[i] = t * -0.5f;
    }
}

CLONES void slope_loop(float *restrict s, const float *restrict x, const float *restrict cdf,
                       const float *restrict grad, float c, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; ++i) {
        float t = s[i] * c;
        t *= x[i];
        t += cdf[i];
        s[i] = t * grad[i];
    }
}

/* Get each argument as a C-contiguous float32 buffer ('f') of `n` elements (n < 0: the first
   buffer's length), the ones in `writable` writable; on failure, release what was got. */
static int get_floats(PyObject **objects, int count, Py_buffer *views, const int *writable,
                      Py_ssize_t *n) {
    for (int i = 0; i < count; ++i) {
        int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable[i] ? PyBUF_WRITABLE : 0);
        if (PyObject_GetBuffer(objects[i], &views[i], flags) < 0) {
            while (i--) PyBuffer_Release(&views[i]);
            return -1;
        }
    }
    for (int i = 0; i < count; ++i) {
        if (strcmp(views[i].format, "f") != 0) {
            PyErr_Format(PyExc_TypeError, "_gelu: argument %d must be float32 ('f'), got '%s'",
                         i + 1, views[i].format);
            goto fail;
        }
    }
    *n = views[0].len / 4;
    return 0;
fail:
    for (int i = 0; i < count; ++i) PyBuffer_Release(&views[i]);
    return -1;
}

static void release(Py_buffer *views, int count) {
    for (int i = 0; i < count; ++i) PyBuffer_Release(&views[i]);
}

static int same_lengths(Py_buffer *views, int count, const int *skip, Py_ssize_t n) {
    for (int i = 0; i < count; ++i) {
        if (!skip[i] && views[i].len / 4 != n) {
            PyErr_Format(PyExc_ValueError,
                         "_gelu: argument %d has %zd elements, argument 1 has %zd", i + 1,
                         views[i].len / 4, n);
            release(views, count);
            return -1;
        }
    }
    return 0;
}

static PyObject *forward(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[7];
    float split, clip, t_scale;
    if (!PyArg_ParseTuple(args, "OOfOffOOOO", &o[0], &o[1], &split, &o[2], &clip, &t_scale,
                          &o[3], &o[4], &o[5], &o[6]))
        return NULL;
    /* x, body, tail coefficients, cdf, out, exponent, g */
    Py_buffer v[7];
    const int writable[7] = {0, 0, 0, 1, 1, 1, 1}, skip[7] = {0, 1, 1, 0, 0, 0, 0};
    Py_ssize_t n;
    if (get_floats(o, 7, v, writable, &n) < 0) return NULL;
    if (same_lengths(v, 7, skip, n) < 0) return NULL;
    Py_ssize_t terms = v[1].len / 4, tail_terms = v[2].len / 4;
    if (terms < 2 || terms > MAX_TERMS || tail_terms < 2 || tail_terms > MAX_TERMS) {
        release(v, 7);
        return PyErr_Format(PyExc_ValueError,
                            "_gelu.forward: body and tail need 2 to %d coefficients each",
                            MAX_TERMS);
    }
    struct tail tail = {v[2].buf, (int)tail_terms, clip, t_scale, v[5].buf, v[6].buf};
    Py_ssize_t k;
    Py_BEGIN_ALLOW_THREADS
    k = forward_loop(v[0].buf, v[1].buf, (int)terms, split, tail, v[3].buf, v[4].buf, n);
    Py_END_ALLOW_THREADS
    release(v, 7);
    return PyLong_FromSsize_t(k);
}

static PyObject *tail_finish(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[5];
    float split;
    if (!PyArg_ParseTuple(args, "OfOOOO", &o[0], &split, &o[1], &o[2], &o[3], &o[4]))
        return NULL;
    /* x, g, e, cdf, out */
    Py_buffer v[5];
    const int writable[5] = {0, 0, 0, 1, 1}, skip[5] = {0, 0, 0, 0, 0};
    Py_ssize_t n;
    if (get_floats(o, 5, v, writable, &n) < 0) return NULL;
    if (same_lengths(v, 5, skip, n) < 0) return NULL;
    Py_BEGIN_ALLOW_THREADS
    tail_finish_loop(v[0].buf, split, v[1].buf, v[2].buf, v[3].buf, v[4].buf, n);
    Py_END_ALLOW_THREADS
    release(v, 5);
    Py_RETURN_NONE;
}

static PyObject *density_exponent(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[2];
    if (!PyArg_ParseTuple(args, "OO", &o[0], &o[1])) return NULL;
    Py_buffer v[2];
    const int writable[2] = {0, 1}, skip[2] = {0, 0};
    Py_ssize_t n;
    if (get_floats(o, 2, v, writable, &n) < 0 || same_lengths(v, 2, skip, n) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    exponent_loop(v[0].buf, v[1].buf, n);
    Py_END_ALLOW_THREADS
    release(v, 2);
    Py_RETURN_NONE;
}

static PyObject *slope(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[4];
    float c;
    if (!PyArg_ParseTuple(args, "OOOOf", &o[0], &o[1], &o[2], &o[3], &c)) return NULL;
    Py_buffer v[4];
    const int writable[4] = {1, 0, 0, 0}, skip[4] = {0, 0, 0, 0};
    Py_ssize_t n;
    if (get_floats(o, 4, v, writable, &n) < 0 || same_lengths(v, 4, skip, n) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    slope_loop(v[0].buf, v[1].buf, v[2].buf, v[3].buf, c, n);
    Py_END_ALLOW_THREADS
    release(v, 4);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"forward", forward, METH_VARARGS,
     "forward(x, body, split, tail, clip, t_scale, cdf, out, exponent, g) -> k"},
    {"tail_finish", tail_finish, METH_VARARGS, "tail_finish(x, split, g, e, cdf, out)"},
    {"density_exponent", density_exponent, METH_VARARGS, "density_exponent(x, s): s = x*x*-0.5"},
    {"slope", slope, METH_VARARGS, "slope(s, x, cdf, grad, c): s = (s*c*x + cdf) * grad"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_gelu", "exact GELU's NumPy passes in one loop, NumPy's bits", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__gelu(void) { return PyModule_Create(&module); }
