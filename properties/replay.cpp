// replay_property (replay.h): one RapidCheck run of a property's body with the replayed case in place of every draw.
#include "replay.h"

#include <rapidcheck.h>

#include <sstream>

#include "tier.h"

namespace flashcheck::properties {
namespace {

const Case* g_replay = nullptr;  // the case of the replay in progress (properties run on one thread)

}  // namespace

const Case* replay_case() { return g_replay; }

ReplayResult replay_property(const PropertyInfo& property, const Case& c) {
  struct Scope {
    explicit Scope(const Case* c) { g_replay = c; }
    ~Scope() { g_replay = nullptr; }
  };
  Case replayed = c;
  replayed.property.clear();
  const Scope scope(&replayed);
  clear_discard_reason();
  rc::detail::TestMetadata metadata;
  metadata.id = std::string("flashcheck-replay/") + property.name;  // no RC_PARAMS reproduce entry names it
  metadata.description = property.name;
  rc::detail::TestParams params;
  params.maxSuccess = 1;
  params.maxDiscardRatio = 0;  // one discard ends the run: the case is the only one there is
  params.disableShrinking = true;
  const auto result = rc::detail::checkTestable([&property] { property.body(); }, metadata, params);
  ReplayResult out;
  if (result.template is<rc::detail::SuccessResult>()) return out;
  if (result.template is<rc::detail::GaveUpResult>()) {
    const std::string& why = discard_reason();
    const bool outside = why.rfind(kOutsidePropertyCases, 0) == 0;
    out.outcome = outside ? Outcome::kRejected : Outcome::kUnsupported;
    out.message = why.empty() ? result.template get<rc::detail::GaveUpResult>().description : why;
    return out;
  }
  std::ostringstream message;
  rc::detail::printResultMessage(result, message);
  out.outcome = Outcome::kFail;
  out.message = message.str();
  return out;
}

}  // namespace flashcheck::properties
