// sm90_emulator_grid.h: the rest of what the Hopper GEMM emulators share, included after
// the kernel file (it needs the kernel file's TensorMap and smem_bytes): the TMA model
// (boxes of two-byte words, the 128-byte swizzle, zero fill outside the matrix), running
// one CTA's fibers to the end, and reading the inputs and tensor maps.

#pragma once

#include <cstring>
#include <string>
#include <utility>
#include <vector>

// ---- TMA (needs the TensorMap the kernel file defines) -------------------------------------

static std::vector<std::pair<const unsigned char*, const unsigned char*>> readable;

void tma_load_2d(unsigned dst, const TensorMap* map, int x, int y, unsigned bar) {
    const auto* base = reinterpret_cast<const unsigned char*>(map->opaque[0]);
    const long long dim0 = map->opaque[1], dim1 = map->opaque[2], stride = map->opaque[3];
    const int box0 = static_cast<int>(map->opaque[4]), box1 = static_cast<int>(map->opaque[5]);
    check(box0 * 2 == 128, "TMA: a 128-byte swizzle needs boxes 128 bytes wide");
    check(box1 >= 1 && box1 <= 256, "TMA: box rows must be 1..256");
    check(dst % 1024 == 0, "TMA: a 128-byte-swizzled box must start 1024-byte aligned");
    at(dst, box0 * box1 * 2, "TMA: box outside shared memory");
    for (int r = 0; r < box1; ++r) {
        for (int e = 0; e < box0; ++e) {
            const long long gx = static_cast<long long>(x) + e, gy = static_cast<long long>(y) + r;
            unsigned short v = 0;
            if (gx >= 0 && gx < dim0 && gy >= 0 && gy < dim1) {
                const unsigned char* src = base + gy * stride + gx * 2;
                bool inside = false;
                for (const auto& range : readable)
                    inside |= src >= range.first && src + 2 <= range.second;
                check(inside, "TMA: the tensor map reaches outside its matrix");
                std::memcpy(&v, src, 2);
            }
            std::memcpy(at(swizzle128(dst + r * 128 + e * 2), 2, "TMA: write"), &v, 2);
        }
    }
    ++tma_count;
    MBarrier& b = barrier(bar);
    b.tx -= static_cast<long long>(box0) * box1 * 2;
    maybe_complete(b);
}


// ---- running a grid -----------------------------------------------------------------------

static void fiber_entry() {
    kernel_body();
    fibers[current].done = true;
}

static void run_cta(int cta, int bn) {
    blockIdx = {static_cast<unsigned>(cta), 0, 0};
    smem.assign(smem_bytes(bn), 0xff);
    barriers.clear();
    block_barrier = Barrier{};
    for (Barrier& b : warpgroup_barrier) b = Barrier{};
    for (Barrier& b : warp_barrier) b = Barrier{};
    for (int t = 0; t < kThreads; ++t) {
        Fiber& f = fibers[t];
        f.done = false;
        f.waiting = nullptr;
        getcontext(&f.context);
        f.context.uc_stack.ss_sp = f.stack.data();
        f.context.uc_stack.ss_size = f.stack.size();
        f.context.uc_link = &scheduler;
        makecontext(&f.context, fiber_entry, 0);
    }
    current = kThreads - 1;
    for (int next; (next = next_runnable()) >= 0;) {
        current = next;
        threadIdx = {static_cast<unsigned>(next), 0, 0};
        swapcontext(&scheduler, &fibers[next].context);
    }
    for (const Fiber& f : fibers) check(f.done, "deadlock: threads wait for each other");
    for (const Fiber& f : fibers)
        check(f.uncommitted.empty() && f.groups.empty(), "a wgmma was never waited for");
}

static std::vector<unsigned char> read_file(const char* path) {
    std::vector<unsigned char> data;
    FILE* f = std::fopen(path, "rb");
    check(f != nullptr, "cannot open an input file");
    unsigned char buffer[65536];
    for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, f)) > 0;)
        data.insert(data.end(), buffer, buffer + n);
    std::fclose(f);
    return data;
}

static TensorMap make_map(const std::vector<unsigned char>& data, char** v) {
    TensorMap map{};
    map.opaque[0] = reinterpret_cast<unsigned long long>(data.data());
    for (int i = 0; i < 5; ++i) map.opaque[1 + i] = std::strtoull(v[i], nullptr, 10);
    check(map.opaque[3] % 16 == 0, "tensor map: the row stride must be a multiple of 16 bytes");
    readable.push_back({data.data(), data.data() + data.size()});
    return map;
}
