// A case line replayed through a property (a case line's property=NAME, flashcheck-repro --property NAME, the
// known cases of suite.cpp): the property's body runs once under RapidCheck, shrinking off, with every case it
// draws replaced by the line's case. The generators ask replay_case() and, while it is set, return that case when
// it lies among the cases they draw (outside_options, generators.h) and discard it with the reason otherwise; the
// relation's own choices come from the case's seed as in every run (RelationDraws, checks.h). So a relation between
// two runs (paged against packed, grouped against repeated heads) fails again on the defect it caught, from its
// case line alone.
#pragma once

#include <string>

#include "flashcheck/case.h"
#include "flashcheck/outcome.h"
#include "properties.h"

namespace flashcheck::properties {

// The case being replayed, or null in an ordinary run.
const Case* replay_case();

struct ReplayResult {
  // kPass: the relation held. kFail: it failed (`message` is RapidCheck's report: the case line, the log of what
  // differed). kRejected: the case is not one the property draws (`message` says why: a mask it does not take, a
  // feature it leaves out). kUnsupported: the property discarded the case (a known peer deviation, a case the
  // subject does not take).
  Outcome outcome = Outcome::kPass;
  std::string message;
};

// Runs `property` once on `c` (the active tier's backend, tier.h), as described above. `c.property` is ignored.
ReplayResult replay_property(const PropertyInfo& property, const Case& c);

}  // namespace flashcheck::properties
