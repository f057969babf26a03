#include "engine/serving/observer.h"

namespace rankd::engine {

ServingObserver* NoopServingObserver() {
  // Leaked on purpose: instances may report during static destruction.
  static ServingObserver* const observer = new ServingObserver();
  return observer;
}

}  // namespace rankd::engine
