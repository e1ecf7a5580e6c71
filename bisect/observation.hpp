// What one evaluation of a search predicate said, shared by every search in bisect/.
#pragma once

namespace faultline::bisect {

// Good: the failure is absent. Bad: present. Skip: the point could not be judged (a build
// failed, the trial hit an infrastructure error); searches route around it.
enum class Observation { Good, Bad, Skip };

inline const char* to_string(Observation observation) {
  switch (observation) {
    case Observation::Good:
      return "good";
    case Observation::Bad:
      return "bad";
    case Observation::Skip:
      return "skip";
  }
  return "?";
}

}  // namespace faultline::bisect
