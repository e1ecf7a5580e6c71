// What one evaluation of a search predicate said, shared by every search in bisect/.
#pragma once

#include <stdexcept>
#include <string>

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

// to_string's inverse, for stored searches and verdicts; std::invalid_argument for other text.
inline Observation observation_from_string(const std::string& text) {
  for (Observation observation : {Observation::Good, Observation::Bad, Observation::Skip})
    if (text == to_string(observation)) return observation;
  throw std::invalid_argument("bisect state: unknown verdict '" + text + "'");
}

}  // namespace faultline::bisect
