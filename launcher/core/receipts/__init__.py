"""What a run was made of, kept after it: receipts, their differences, the lock file, and what
another vLLM release would change. Pure: values in, values out (the commands read and write).
"""
