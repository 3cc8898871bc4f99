"""Issue 25: checkpoint loading bounded by max_bytes, no uninitialised arrays,
zip entries read within their declared sizes, save() through a symbolic link.
"""

# ruff: noqa: E501 (search texts are source lines, whatever their length)

from __future__ import annotations

from mutant_sets import Mutant, lines

PADDLE_PICKLE = "minitorch_amp/serialization/paddle_pickle.py"
PADDLE_RULES = "minitorch_amp/serialization/paddle_rules.py"
PICKLE_SCAN = "minitorch_amp/serialization/pickle_scan.py"
CHECKPOINT = "minitorch_amp/io/checkpoint.py"
CHECKPOINT_ZIP = "minitorch_amp/io/checkpoint_zip.py"
HOSTILE = "tests/test_checkpoint_hostile.py"
HOSTILE_ZIP = "tests/test_checkpoint_hostile_zip.py"

MUTANTS: list[Mutant] = [
    Mutant(
        "paddle-return-numpy-ignored",
        PADDLE_RULES,
        "                if isinstance(obj.get(key), np.ndarray) and not return_numpy:\n",
        "                if isinstance(obj.get(key), np.ndarray):\n",
        (
            "tests/test_paddle_checkpoints.py::"
            "test_return_numpy_gives_numpy_arrays_for_a_state_dict",
        ),
        "load(..., return_numpy=True) of a Paddle .pdparams state dict returns Tensors",
    ),
    Mutant(
        "reconstruct-takes-any-subtype",
        PADDLE_PICKLE,
        lines(
            "        if subtype is not NDARRAY:",
            '            raise UnsafePickleError(f"an array of type {subtype!r}: only numpy.ndarray is read")',
        ),
        "",
        (f"{HOSTILE}::test_reconstruct_makes_only_plain_ndarrays",),
        "_reconstruct accepts any subtype (an ndarray subclass, a matrix), not only numpy.ndarray",
    ),
    Mutant(
        "reconstruct-shape-not-counted",
        PADDLE_PICKLE,
        "        declared = math.prod(shape) * dtype.itemsize\n",
        "        declared = 0\n",
        (f"{HOSTILE}::test_an_array_a_pickle_declares_counts_against_max_bytes",),
        "the shape _reconstruct declares before its data is not counted against max_bytes",
    ),
    Mutant(
        "ndarray-call-gives-uninitialised-memory",
        PADDLE_PICKLE,
        lines(
            "    def __call__(self, *args, **kwargs):",
            "        raise UnsafePickleError(",
        ),
        lines(
            "    def __call__(self, *args, **kwargs):",
            "        return np.ndarray(*args, **kwargs)",
            "        raise UnsafePickleError(",
        ),
        (
            f"{HOSTILE}::test_an_array_that_never_gets_its_data_is_refused_not_returned_uninitialised",
            f"{HOSTILE}::test_an_array_a_pickle_declares_counts_against_max_bytes",
        ),
        "a pickle may call numpy.ndarray(shape, dtype): np.empty memory returned as weights",
    ),
    Mutant(
        "unfilled-array-returned",
        PADDLE_PICKLE,
        "        if unpickler.unfilled():\n",
        "        if False:\n",
        (
            f"{HOSTILE}::test_an_array_that_never_gets_its_data_is_refused_not_returned_uninitialised",
        ),
        "an array _reconstruct made that never received its __setstate__ is returned",
    ),
    Mutant(
        "dtype-state-unchecked",
        PADDLE_PICKLE,
        '            raise UnsafePickleError(f"a dtype state {state!r:.80}: only a byte order is read")\n',
        "            pass\n",
        (f"{HOSTILE}::test_a_dtype_takes_only_its_byte_order_from_the_pickle",),
        "a pickle's dtype state (flags saying float32 holds objects, fields) passes unchecked",
    ),
    Mutant(
        "pickle-lengths-past-the-file",
        PICKLE_SCAN,
        "    if needed > end:\n",
        "    if False:\n",
        (f"{HOSTILE}::test_a_length_or_index_a_pickle_declares_is_checked_before_it_is_allocated",),
        "a pickle's declared lengths are not checked against the file (BINBYTES8 of 2**62)",
    ),
    Mutant(
        "pickle-copies-not-charged",
        PADDLE_PICKLE,
        '            self.budget.charge(OBJECT_COST + ITEM_COST * len(items), f"a {kind.__name__}")\n',
        "",
        (f"{HOSTILE}::test_calls_that_copy_what_the_file_holds_count_against_max_bytes",),
        "list(x), tuple(x), set(x) in a pickle copy without counting against max_bytes",
    ),
    Mutant(
        "name-table-name-any-type",
        PADDLE_RULES,
        "    if name is not None and not isinstance(name, str):\n",
        "    if False:\n",
        (f"{HOSTILE}::test_a_tensor_name_from_the_name_table_must_be_a_string",),
        "a pickle's name table may set Tensor.name to a list",
    ),
    Mutant(
        "zip-entry-declared-size-unchecked",
        CHECKPOINT_ZIP,
        "                nbytes == stored,\n",
        "                True,\n",
        (
            f"{HOSTILE_ZIP}::test_a_header_declaring_more_than_its_entry_holds_is_refused_before_allocating",
        ),
        "a .npy header may declare more than its zip entry holds: np.empty of it comes first",
    ),
    Mutant(
        "zip-index-uncapped",
        CHECKPOINT_ZIP,
        "            not self.budget.limited or size <= MAX_INDEX_BYTES,\n",
        "            True,\n",
        (f"{HOSTILE_ZIP}::test_an_index_of_more_than_16_mib_is_refused_before_it_is_decompressed",),
        "an index of any size is parsed (20 MB of JSON in a 30 KB file)",
    ),
    Mutant(
        "zip-index-not-charged",
        CHECKPOINT_ZIP,
        '        self.budget.charge(INDEX_COST * size, f"parsing its index {STRUCTURE} ({size} bytes)")\n',
        "",
        (f"{HOSTILE_ZIP}::test_the_index_counts_against_max_bytes_at_what_parsing_it_can_take",),
        "parsing the index is not counted against max_bytes",
    ),
    Mutant(
        "zip-directory-not-charged",
        CHECKPOINT_ZIP,
        '    budget.charge(DIRECTORY_COST * end[zipfile._ECD_SIZE], "the zip\'s central directory")\n',
        "",
        (f"{HOSTILE_ZIP}::test_the_zip_directory_counts_against_max_bytes",),
        "the zip's central directory (one object per entry) is not counted against max_bytes",
    ),
    Mutant(
        "zip-entry-read-whole",
        CHECKPOINT_ZIP,
        "        _read_into(entry, memoryview(data), name)\n",
        "        data[:] = entry.read()\n",
        (
            f"{HOSTILE_ZIP}::test_an_entry_that_inflates_past_its_declared_size_costs_only_its_declaration",
        ),
        "the index is decompressed in one read, whatever size it declares",
    ),
    Mutant(
        "zip-any-compression-method",
        CHECKPOINT_ZIP,
        "        info.compress_type in _METHODS,\n",
        "        True,\n",
        (
            f"{HOSTILE_ZIP}::test_bzip2_and_lzma_entries_are_refused_as_their_inflation_cannot_be_bounded",
        ),
        "bzip2 and lzma entries are opened: zipfile inflates their blocks with no output limit",
    ),
    Mutant(
        "npy-header-length-unchecked",
        CHECKPOINT_ZIP,
        '    _need(length <= _MAX_NPY_HEADER, f"{what} declares a header of {length} bytes")\n',
        "",
        (f"{HOSTILE_ZIP}::test_a_npy_header_declaring_4_gib_is_refused_without_reading_it",),
        "a version 2 .npy header's 4-byte length is read as declared (4 GiB asked of the entry)",
    ),
    Mutant(
        "save-replaces-the-symlink",
        CHECKPOINT,
        "    path = os.path.realpath(path)  # through a symbolic link: the file it points to\n",
        "    path = os.path.abspath(path)\n",
        (
            "tests/test_reliability_io.py::"
            "test_save_through_a_symbolic_link_writes_its_target_and_keeps_the_link",
        ),
        "save() through a symbolic link replaces the link with a file and leaves the target old",
    ),
]
