int pipeline() { return 0; }
