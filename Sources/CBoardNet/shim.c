// Intentionally empty: CBoardNet only exports system headers to Swift.
#include "CBoardNet.h"
