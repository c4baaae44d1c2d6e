"""What a vLLM release is: its flag catalog, argv words, model facts by kind."""
