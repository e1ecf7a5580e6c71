// Anchors the faultline_bisect library (every search is header-declared, defined in its own file).
#include "bisect/observation.hpp"
