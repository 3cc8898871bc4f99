"""Reading checkpoint bytes without trusting them: other frameworks' formats (Paddle's pickles,
never running code) and the memory budget every load is held to (``bounds.py``)."""
