// Translation unit that builds the shared precompiled <torch/torch.h>; it defines nothing.
