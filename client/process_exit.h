#ifndef RANKD_CLIENT_PROCESS_EXIT_H_
#define RANKD_CLIENT_PROCESS_EXIT_H_

namespace rankd::client {

// Ends a command-line tool that used gRPC: flushes std::cout, std::cerr and
// every stdio stream, then exits with `code` at once, without running static
// destructors or atexit handlers.
//
// Why: gRPC tears its library down on a thread of its own some time after the
// last channel is gone (the callback completion queue shuts down once its
// timers and connection attempts end). A tool that
// returns from main meanwhile runs exit-time destructors under that thread,
// and the process can die of SIGABRT after it has done all its work. Exiting
// here ends every thread at once instead. Call it only after everything the
// tool writes has been written (files closed or flushed by their owners).
[[noreturn]] void ExitFlushed(int code);

}  // namespace rankd::client

#endif  // RANKD_CLIENT_PROCESS_EXIT_H_
