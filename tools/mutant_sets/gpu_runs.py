"""Found on the first GPU runs of 2026-11-27 (an NVIDIA H200): the kernel cache warmed in
parallel, the GPU check's stages, the Hopper GEMM's host side, the optim.cu kernel check,
the FP8 GEMM benchmark and the FP8 GEMMs' epilogue rounding."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant, lines

MUTANTS: list[Mutant] = [
    Mutant(
        "warm-up-passes-the-options-as-a-list",
        "minitorch_amp/backend/kernel_warmup.py",
        "                code=job.source, options=job.options, name_expressions=job.names\n",
        "                code=job.source, options=list(job.options), name_expressions=job.names\n",
        (
            "tests/test_kernel_warmup.py::"
            "test_each_job_compiles_exactly_what_the_loader_compiles_for_its_module",
        ),
        "the warm-up hands CuPy the options as a list: CuPy's cache key holds their repr, so every later compile of the loader misses the cache the warm-up filled",
    ),
    Mutant(
        "warm-up-forks-a-cuda-process",
        "minitorch_amp/backend/kernel_warmup.py",
        '    spawn = multiprocessing.get_context("spawn")\n',
        '    spawn = multiprocessing.get_context("fork")\n',
        (
            "tests/test_kernel_warmup.py::test_warming_compiles_every_module_once_in_spawned_processes",
        ),
        "the warm-up forks the process that initialised CUDA at import: the workers' CUDA calls fail or hang",
    ),
    Mutant(
        "warm-up-misses-a-launcher",
        "minitorch_amp/backend/kernel_warmup.py",
        '    "fused_optim",\n',
        "",
        (
            "tests/test_kernel_warmup.py::"
            "test_the_launcher_list_names_every_backend_module_that_registers_a_kernel_file",
        ),
        "a launcher module left out of LAUNCHERS: the warm-up skips its kernel file when nothing else imported it",
    ),
    Mutant(
        "split-kernels-share-one-cache-key",
        "minitorch_amp/backend/kernels.py",
        '        return f"{self.source()}\\n// this module: {name}\\n", (name,)\n',
        "        return self.source(), (name,)\n",
        (
            "tests/test_kernel_warmup.py::"
            "test_the_jobs_cover_every_kernel_file_of_cuda_split_gemms_first_then_largest_first",
        ),
        "each kernel of a split file is compiled from the file's very text: CuPy keys its cache on the source, so the second kernel loads the first one's module and misses its own",
    ),
    Mutant(
        "loader-compiles-a-split-file-whole",
        "minitorch_amp/backend/kernels.py",
        "        unit = name if registered.split else None\n",
        "        unit = None\n",
        (
            "tests/test_kernel_warmup.py::"
            "test_the_loader_compiles_one_kernel_of_a_split_file_and_the_whole_of_another",
        ),
        "the loader compiles every kernel of a GEMM file at its first launch (a minute on a Hopper GEMM) and misses the warm-up's per-kernel cache entries",
    ),
    Mutant(
        "warm-up-compiles-split-files-whole",
        "minitorch_amp/backend/kernels.py",
        "        return self.names if self.split else (None,)\n",
        "        return (None,)\n",
        (
            "tests/test_kernel_warmup.py::"
            "test_each_job_compiles_exactly_what_the_loader_compiles_for_its_module",
        ),
        "the warm-up compiles each GEMM file as one module, which the loader never asks for: every GEMM launch compiles again",
    ),
    Mutant(
        "jobs-without-the-warm-up-accepted",
        "minitorch_amp/__main__.py",
        '        parser.error("-j/--jobs goes with --warm-kernel-cache")\n',
        "        pass\n",
        (
            "tests/test_kernel_warmup.py::"
            "test_the_command_line_takes_a_number_of_processes_with_the_warm_up_only",
        ),
        "python -m minitorch_amp -j 8 runs the whole report and silently ignores -j",
    ),
    Mutant(
        "device-stage-without-the-warm-up",
        "benchmarks/gpu_check.sh",
        '    "failed=0; $warm_up || failed=1; nvidia-smi ',
        '    "failed=0; nvidia-smi ',
        (
            "tests/test_gpu_check.py::"
            "test_the_device_stage_fills_the_kernel_cache_on_every_core_before_the_report",
        ),
        "the device stage compiles every kernel serially again and times out, as in the first H200 run",
    ),
    Mutant(
        "pytest-stage-never-uses-xdist",
        "benchmarks/gpu_check.sh",
        '    xdist=" -n 8 --dist loadfile"\n',
        '    xdist=""\n',
        (
            "tests/test_gpu_check.py::"
            "test_pytest_runs_in_8_processes_where_pytest_xdist_is_installed",
        ),
        "the pytest stage runs serially where pytest-xdist is installed",
    ),
    Mutant(
        "tensor-maps-never-cached",
        "minitorch_amp/backend/tensor_maps.py",
        "    found = _maps.get(key)\n",
        "    found = None\n",
        (
            "tests/test_gemm_sm90_host.py::test_the_same_operand_is_encoded_once_and_its_map_found_after",
        ),
        "every Hopper GEMM launch encodes both tensor maps anew (12 µs of host time each on the H200)",
    ),
    Mutant(
        "tensor-map-cache-grows-without-bound",
        "minitorch_amp/backend/tensor_maps.py",
        "    if len(_maps) > MAP_CACHE_SIZE:\n",
        "    if False:\n",
        ("tests/test_gemm_sm90_host.py::test_the_cache_keeps_only_the_most_recently_used_maps",),
        "the tensor-map cache keeps every operand ever seen (a long run's activations grow it without end)",
    ),
    Mutant(
        "tensor-map-key-forgets-the-box",
        "minitorch_amp/backend/tensor_maps.py",
        "    key = (array.data.ptr, array.shape, array.strides[0], box)\n",
        "    key = (array.data.ptr, array.shape, array.strides[0])\n",
        (
            "tests/test_gemm_sm90_host.py::test_a_different_shape_stride_box_or_address_gets_its_own_map",
        ),
        "an operand used once K-major and once MN-major gets the first map's box both times",
    ),
    Mutant(
        "forced-plan-kept-as-the-shapes-recipe",
        "minitorch_amp/backend/gemm_sm90.py",
        "    if _forced is not None:\n        return _recipe(",
        "    if False:\n        return _recipe(",
        ("tests/test_gemm_sm90_host.py::test_a_forced_plan_is_used_and_never_kept",),
        "a plan forced by the sweep is kept for the shape and launched after the sweep ends",
    ),
    Mutant(
        "recipe-key-forgets-the-variant",
        "minitorch_amp/backend/gemm_sm90.py",
        "    return _kept_recipe(m, n, k, transpose_a, transpose_b, out_dtype, variant, sm_count())\n",
        "    return _kept_recipe(m, n, k, transpose_a, transpose_b, out_dtype, FLOAT16, sm_count())\n",
        (
            "tests/test_gemm_sm90_host.py::test_each_variant_launches_its_own_kernels_and_keeps_its_own_recipe",
        ),
        "a bfloat16 GEMM finds the float16 kernel's name in the recipe of its shape",
    ),
    Mutant(
        "split-launch-counts-in-too-few",
        "minitorch_amp/backend/gemm_sm90.py",
        "            counts = split_counts(tiles * SPLIT_COUNTS_PER_TILE)\n",
        "            counts = split_counts(tiles)\n",
        ("tests/test_gemm_sm90_host.py::test_a_forced_plan_is_used_and_never_kept",),
        "split-K counts one entry per tile where the kernel counts per warp of each consumer: the last tiles' warps count past the array",
    ),
    Mutant(
        "mma-sync-strides-passed-as-int32",
        "minitorch_amp/backend/gemm_gpu.py",
        "    tail = (np.int32(flags), *(np.int64(x) for x in (stride_a, stride_b, stride_out)))\n",
        "    tail = (np.int32(flags), *(np.int32(x) for x in (stride_a, stride_b, stride_out)))\n",
        ("tests/test_gemm_batched.py::test_a_matrix_shared_by_every_entry_has_stride_0",),
        "the batch strides reach the kernel's long long parameters as 4-byte values",
    ),
    Mutant(
        "kernel-check-host-half-follows-the-current-device",
        "minitorch_amp/utils/kernel_check.py",
        '        param = Parameter._from_array(data, name="kernel_check.w")\n',
        '        param = Parameter(data, name="kernel_check.w")\n',
        (
            "tests/test_fused_optim_kernel.py::"
            "test_the_kernel_check_keeps_its_host_half_on_the_host_when_the_gpu_is_current",
        ),
        "the optim.cu check's host parameter goes to the current GPU with NumPy grads: 'memoryview' has no 'ptr' (the H200 run)",
    ),
    Mutant(
        "fp8-linear-rounds-after-a-float32-product",
        "minitorch_amp/amp/fp8/gemm.py",
        "        out = fp8_gemm(x_q, w_qt.T, sx, sw, x.dtype, bias=bias if fold else None)\n",
        "        out = (lambda p: p + bias if fold else p)(fp8_gemm(x_q, w_qt.T, sx, sw).astype(x.dtype))\n",
        (
            "tests/test_fp8_autocast.py::test_each_fp8_gemm_rounds_to_its_result_dtype_in_the_epilogue",
        ),
        "the FP8 Linear's forward product comes out in float32 and is cast after (a launch and a float32 copy more on a GPU)",
    ),
    Mutant(
        "fp8-benchmark-drops-the-format-code",
        "benchmarks/fp8_gemm.py",
        '    return fp8_gemm_nt(a, b_t, scale_a, scale_b, "bfloat16", E4M3, E4M3)\n',
        '    return fp8_gemm_nt(a, b_t, scale_a, scale_b, "bfloat16")\n',
        (
            "tests/test_benchmark_fp8_gemm.py::test_it_hands_our_gemm_uint8_storage_with_its_format_code",
        ),
        "the FP8 GEMM benchmark hands uint8 storage without its format code and stops before timing (the H200 run)",
    ),
    Mutant(
        "compare-graphs-float16-only",
        "examples/simple_net.py",
        "        replays = (False, True) if graph else (False,)\n",
        '        replays = (False, True) if graph and dtype == "float16" else (False,)\n',
        (
            "tests/test_examples_cli.py::test_compare_with_graph_replays_every_dtype_after_its_eager_rows",
        ),
        "simple_net.py --compare --graph --dtype float8 has no FP8 graph row for issue 28's comparison",
    ),
    Mutant(
        "device-twin-repeats-per-tensor-state-with-a-list",
        "minitorch_amp/optimizer/bucket.py",
        lines(
            "        for i, (a, b) in enumerate(zip(self.offsets[start:stop], ends), start):",
            "            out[a - base : b - base] = flat[i : i + 1]  # broadcast on the device",
        ),
        lines(
            "        counts = [b - a for a, b in zip(self.offsets[start:stop], ends)]",
            "        out[...] = self.xp.repeat(flat[start:stop], counts)",
        ),
        (
            "tests/test_scaler_no_host_read.py::test_the_gpu_tests_scaler_step_on_the_cupy_twins_reads_nothing_on_the_host",
            "tests/test_scaler_no_host_read.py::test_every_optimizers_scaler_step_on_the_cupy_twins_reads_nothing_on_the_host[adam]",
        ),
        "the device twin spreads Adam's beta pows over a run with xp.repeat(values, list of counts): CuPy 14 uploads the counts and reads their sum back, so every GradScaler step with raw kernels off waits for the GPU",
    ),
    Mutant(
        "device-twin-spreads-the-first-tensors-state-over-the-run",
        "minitorch_amp/optimizer/bucket.py",
        "            out[a - base : b - base] = flat[i : i + 1]  # broadcast on the device\n",
        "            out[a - base : b - base] = flat[start : start + 1]  # broadcast on the device\n",
        (
            "tests/test_fused_optim_kernel.py::test_parameters_at_different_steps_in_one_device_bucket[Adam-0]",
            "tests/test_fused_optim_kernel.py::test_parameters_at_different_steps_in_one_device_bucket[AdamW-0]",
        ),
        "the device twin gives every parameter of a run the first one's beta pows: parameters that joined at a later step get the wrong bias correction",
    ),
    Mutant(
        "strict-stand-in-takes-a-list-of-repeats",
        "tests/emulated_gpu.py",
        "    if not isinstance(repeats, (int, np.integer)):\n",
        "    if isinstance(repeats, np.ndarray):\n",
        (
            "tests/test_scaler_no_host_read.py::test_the_stand_in_refuses_each_kind_of_host_read[repeat(list)]",
        ),
        "the CPU stand-in for CuPy lets repeat() take a list of counts, which CuPy 14 reads back: the no-host-read tests would miss the H200's sync",
    ),
    Mutant(
        "fp8-linear-forward-reads-the-weight-mn-major",
        "minitorch_amp/amp/fp8/gemm.py",
        "        out = fp8_gemm(x_q, w_qt.T, sx, sw, x.dtype, bias=bias if fold else None)\n",
        "        out = fp8_gemm(x_q, w_q, sx, sw, x.dtype, bias=bias if fold else None)\n",
        (
            "tests/test_fp8_cast_transposed.py::test_an_fp8_linear_hands_its_gemms_contiguous_k_major_operands_only",
        ),
        "the FP8 Linear's forward hands the kernel the weight row-major: a transposing copy of its bytes every step",
    ),
    Mutant(
        "fp8-linear-dw-transposes-the-gradient-by-copy",
        "minitorch_amp/amp/fp8/gemm.py",
        "            gw = fp8_gemm(x_qt, g_qt[0].T, sx, sg, w_dtype, out=w_out)\n",
        "            gw = fp8_gemm(x_qt, g_q, sx, sg, w_dtype, out=w_out)\n",
        (
            "tests/test_fp8_cast_transposed.py::test_an_fp8_linear_hands_its_gemms_contiguous_k_major_operands_only",
        ),
        "dW reads the gradient row-major: the kernel copies its transpose each backward",
    ),
    Mutant(
        "fp8-fused-cast-transposes-nothing",
        "minitorch_amp/amp/fp8/scaling.py",
        "        if transpose:  # the transposed bytes in the same pass (a 2-D x)\n",
        "        if False:  # the transposed bytes in the same pass (a 2-D x)\n",
        (
            "tests/test_fp8_cast_transposed.py::test_on_the_gpu_a_delayed_cast_and_transpose_is_one_launch_and_the_numpy_bits",
        ),
        "the GPU's delayed cast_transposed returns no transpose (the cast kernel without its transposing twin)",
    ),
    Mutant(
        "fp8-weight-cast-twice-for-its-transpose",
        "minitorch_amp/amp/fp8/autocast.py",
        "    if entry is None or entry[0] is not weight or entry[4] != weight._version:\n",
        "    if entry is None or entry[0] is not weight or entry[4] != weight._version or (transpose and entry[3] is None):\n",
        (
            "tests/test_fp8_cast_transposed.py::test_a_weight_a_convolution_cast_first_is_transposed_from_its_copy_not_cast_again",
        ),
        "a weight a convolution cast first is cast again for its transpose: a second amax in the history",
    ),
]
