"""Defects a review of ``minitorch_amp.io`` found (session of 2026-11-28, evening), each
planted back: the tests written with the fixes must see them."""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant, lines

T = "tests/test_io_review_nov28.py::"
NO_FILE_NAME = T + "test_a_path_without_a_file_name_is_refused_before_anything_is_written"
RULES = "minitorch_amp/serialization/paddle_rules.py"
CHECKPOINT = "minitorch_amp/io/checkpoint.py"
BYTES_IO_ROUND_TRIP = T + "test_save_and_load_round_trip_through_a_bytes_io"

MUTANTS: list[Mutant] = [
    Mutant(
        "paddle-bfloat16-bits-refused",
        RULES,
        lines(
            "    if array.dtype == np.uint16:  # a bfloat16 tensor's bits (Paddle's numpy() of BF16)",
            "        array = array.view(bfloat16)",
        ),
        lines("    if False:", "        pass"),
        (T + "test_a_paddle_bfloat16_tensor_loads_as_bfloat16_with_its_values",),
        "a Paddle pickle's uint16 arrays (bfloat16 tensors) are not loaded as bfloat16",
    ),
    Mutant(
        "paddle-int8-tensor-called-corrupt",
        RULES,
        "    elif array.dtype not in SUPPORTED:\n",
        "    elif False:\n",
        (T + "test_an_int8_paddle_tensor_is_refused_with_its_key_and_return_numpy_reads_it",),
        "an int8 Paddle tensor fails as a 'truncated or corrupt' file, without its key",
    ),
    Mutant(
        "batch-size-none-skips-collate-fn",
        "minitorch_amp/io/dataloader.py",
        "        self._sample_fn = _single if collate_fn is None else _collate_one(collate_fn)\n",
        "        self._sample_fn = _single\n",
        (
            T + "test_batch_size_none_calls_collate_fn_on_each_sample[map-style]",
            T + "test_batch_size_none_calls_collate_fn_on_each_sample[iterable]",
        ),
        "DataLoader(batch_size=None, collate_fn=f) never calls f",
    ),
    Mutant(
        "save-takes-a-path-without-a-file-name",
        CHECKPOINT,
        lines("    if not os.path.basename(path):", "        raise ValueError("),
        lines("    if False:", "        raise ValueError("),
        (
            NO_FILE_NAME + "[empty]",
            NO_FILE_NAME + "[folder-slash]",
        ),
        "save(obj, '') writes a temporary file into the parent folder; save(obj, 'd/') a file d",
    ),
    Mutant(
        "save-refuses-a-bytes-io",
        CHECKPOINT,
        lines("    if isinstance(path, io.BytesIO):", "        arrays: list[np.ndarray] = []"),
        lines("    if False:", "        arrays: list[np.ndarray] = []"),
        (BYTES_IO_ROUND_TRIP,),
        "save(obj, io.BytesIO()) raises a bare TypeError",
    ),
    Mutant(
        "load-refuses-a-bytes-io",
        CHECKPOINT,
        lines(
            "    if isinstance(path, io.BytesIO):",
            "        size, position = path.getbuffer().nbytes, path.tell()",
        ),
        lines("    if False:", "        size, position = path.getbuffer().nbytes, path.tell()"),
        (BYTES_IO_ROUND_TRIP, T + "test_a_paddle_pickle_loads_from_a_bytes_io"),
        "load(io.BytesIO(...)) raises a bare TypeError",
    ),
    Mutant(
        "paddle-pickle-from-a-bytes-io-asks-its-fileno",
        "minitorch_amp/serialization/paddle_pickle.py",
        lines("    if isinstance(f, io.BytesIO):", "        return f.getbuffer().nbytes"),
        lines("    if False:", "        return f.getbuffer().nbytes"),
        (T + "test_a_paddle_pickle_loads_from_a_bytes_io",),
        "a Paddle pickle in an io.BytesIO fails on its missing fileno()",
    ),
    Mutant(
        "save-ignores-protocol",
        CHECKPOINT,
        lines("    _check_protocol(protocol)", "    if isinstance(path, io.BytesIO):"),
        lines("    if isinstance(path, io.BytesIO):"),
        (
            T + "test_a_bad_protocol_gets_paddles_error_and_writes_nothing[1]",
            T + "test_a_bad_protocol_gets_paddles_error_and_writes_nothing[str]",
        ),
        "save accepts protocol=1, 7, '4' or None silently",
    ),
    Mutant(
        "collate-widens-numpy-int32",
        "minitorch_amp/io/data.py",
        "        if array.dtype in (np.int32, np.int64):  # np.array's own: kept, as in Paddle\n",
        "        if False:\n",
        (T + "test_default_collate_keeps_numpy_int32_scalars_int32",),
        "default_collate_fn turns NumPy int32 scalars into an int64 batch",
    ),
]
