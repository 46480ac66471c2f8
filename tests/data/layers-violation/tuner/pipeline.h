#pragma once
int pipeline();
