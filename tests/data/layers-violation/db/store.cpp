#include "tuner/pipeline.h"
