"""Composite patterns (layer norm, GELU, softmax, logsumexp) and the matcher that finds them
in a recorded program: pure, shared by the gradient tape and the compiler's passes."""
