#include "ir/interpreter.h"
