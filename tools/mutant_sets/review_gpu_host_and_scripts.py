"""Defects a review of the GPU-side host code, the examples and the benchmarks found (session
of 2026-11-28, evening), each planted back: the tests written with the fixes must see them."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant, lines

DEVICE = "tests/test_launch_device.py::"
GPU_CHECK = "tests/test_gpu_check.py::"
FLAGS = "tests/test_simple_net_flags.py::"

MUTANTS: list[Mutant] = [
    Mutant(
        "optimizer-table-on-the-current-gpu",
        "minitorch_amp/optimizer/bucket_kernel.py",
        lines(
            "        with _device.cupy.cuda.Device(self.place.index):  # the table too: on the bucket's GPU",
            "            words = self._words(grads)",
        ),
        lines(
            "        words = self._words(grads)",
            "        with _device.cupy.cuda.Device(self.place.index):",
        ),
        (DEVICE + "test_the_fused_optimizer_uploads_its_table_on_the_parameters_gpu",),
        "the fused optimizer's table is uploaded to the current GPU, read by a kernel on another",
    ),
    Mutant(
        "fp8-cast-on-the-current-gpu",
        "minitorch_amp/backend/fp8_kernels.py",
        "        with x.device:  # allocate and launch on x's GPU, whichever is current\n",
        "        with _device.cupy.cuda.Device(_device.cupy.cuda.runtime.getDevice()):\n",
        (DEVICE + "test_an_fp8_cast_allocates_and_launches_on_its_inputs_gpu",),
        "an FP8 cast of a tensor on gpu:1 allocates and launches on the current gpu:0",
    ),
    Mutant(
        "fp8-gemm-on-the-current-gpu",
        "minitorch_amp/backend/fp8_gemm.py",
        "        with a.device:  # allocate and launch on the operands' GPU, whichever is current\n",
        "        with _device.cupy.cuda.Device(_device.cupy.cuda.runtime.getDevice()):\n",
        (DEVICE + "test_an_fp8_gemm_allocates_and_launches_on_its_operands_gpu",),
        "a kept FP8 GEMM on gpu:1 allocates its output and launches on the current gpu:0",
    ),
    Mutant(
        "host-fed-fill-on-the-current-gpu",
        "minitorch_amp/backend/graphs.py",
        "                with self.array.device:  # the fill runs on the buffer's GPU\n",
        "                with _device.cupy.cuda.Device(_device.cupy.cuda.runtime.getDevice()):\n",
        (DEVICE + "test_a_host_fed_value_is_written_on_its_buffers_gpu",),
        "a learning rate on gpu:1 is filled by a kernel on the current gpu:0",
    ),
    Mutant(
        "failed-capture-begin-keeps-its-contexts",
        "minitorch_amp/backend/graphs.py",
        "        with contextlib.ExitStack() as stack:  # (closed again if anything below raises)\n",
        "        stack = contextlib.ExitStack()\n        if True:\n",
        (
            DEVICE
            + "test_a_capture_that_cannot_begin_leaves_device_stream_and_allocator_as_they_were",
        ),
        "a begin_capture that raises leaves the capture stream and its device current",
    ),
    Mutant(
        "descriptor-compares-big-shapes-by-size",
        "minitorch_amp/backend/comm_check.py",
        "            shape[:2] = [int(np.prod(array.shape)), zlib.crc32(whole)]\n",
        "            shape[:2] = [int(np.prod(array.shape)), 0]\n",
        ("tests/test_distributed_comm.py::test_mismatch_message_lists_every_rank",),
        "two 9-d tensors of one size but different shapes pass the collective's check",
    ),
    Mutant(
        "capture-split-counts-kept-for-later",
        "minitorch_amp/backend/gemm_sm90.py",
        "    kept = _SPLIT_COUNTS if capture is None else capture.scratch\n",
        "    kept = _SPLIT_COUNTS\n",
        (
            "tests/test_gemm_sm90_host.py::test_a_capture_makes_its_own_split_counts_and_leaves_the_kept_ones",
        ),
        "split-K counts zeroed only inside a graph serve later launches, unzeroed if it never ran",
    ),
    Mutant(
        "device-stage-stops-at-the-first-failure",
        "benchmarks/gpu_check.sh",
        "    \"failed=0; $warm_up || failed=1; nvidia-smi || echo 'nvidia-smi: not found'; \\\n",
        "    \"failed=0; $warm_up || exit 1; nvidia-smi || echo 'nvidia-smi: not found'; \\\n",
        (GPU_CHECK + "test_a_kernel_that_fails_to_compile_does_not_hide_the_device_report",),
        "a kernel that fails to compile hides the environment report and the device line",
    ),
    Mutant(
        "graph-rows-warm-up-without-a-capture",
        "examples/simple_net.py",
        '    updates = GRAPH_WARMUP + 2 if kwargs.get("graph") else 2\n',
        "    updates = 2\n",
        (FLAGS + "test_the_warm_up_reaches_a_capture_and_a_replay_when_the_rows_are_graphed",),
        "the timed graph rows pay for the process's first capture",
    ),
    Mutant(
        "gpt-sampling-flags-checked-after-training",
        "examples/gpt.py",
        "    if args.temperature <= 0 or args.top_k < 1 or args.sample_length < 0:\n",
        "    if False:\n",
        ("tests/test_gpt_example.py::test_bad_sampling_flags_are_refused_before_training",),
        "--top-k 0 trains for minutes, then fails with a broadcast error",
    ),
    Mutant(
        "a-benchmark-needs-an-install",
        "benchmarks/step_kernels.py",
        "sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout\n",
        "",
        (
            "tests/test_scripts_from_a_checkout.py::test_every_script_finds_the_package_without_an_install",
        ),
        "step_kernels.py fails with ModuleNotFoundError on the GPU machine, which installs nothing",
    ),
]
