// A CUDA layer that uses the model's types: select/ would drag in the pruner and libclang.
#pragma once
#include "pruner/occupancy.h"
