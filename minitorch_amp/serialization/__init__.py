"""Reading checkpoints in other frameworks' formats (Paddle's pickles), never running code."""
