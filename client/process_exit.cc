#include "client/process_exit.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>

namespace rankd::client {

void ExitFlushed(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  _exit(code);
}

}  // namespace rankd::client
