// A strategy that reaches up into the run's stages: the rooms of tuner/ run one way.
#pragma once
#include "tuner/run/pipeline.h"
