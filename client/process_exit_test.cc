#include "client/process_exit.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "gtest/gtest.h"

namespace rankd::client {
namespace {

// Runs ExitFlushed(code) in a child whose stdout is a pipe (so std::cout and
// stdio are fully buffered) and returns what the child wrote; `status` gets
// its wait status.
std::string RunChild(int code, int* status) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], STDOUT_FILENO);
    std::cout << "from iostream;";
    std::printf("from stdio");
    ExitFlushed(code);
  }
  close(fds[1]);
  std::string out;
  char buf[256];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) out.append(buf, n);
  close(fds[0]);
  EXPECT_EQ(waitpid(pid, status, 0), pid);
  return out;
}

TEST(ProcessExitTest, FlushesBufferedOutputAndKeepsTheCode) {
  for (const int code : {0, 3, 7}) {
    int status = 0;
    const std::string out = RunChild(code, &status);
    EXPECT_EQ(out, "from iostream;from stdio") << code;
    ASSERT_TRUE(WIFEXITED(status)) << code;
    EXPECT_EQ(WEXITSTATUS(status), code);
  }
}

}  // namespace
}  // namespace rankd::client
