// Requests and responses of the raw (grpc::ByteBuffer) methods of the public
// service (server/ranking_service.h): the service parses and serializes its
// messages itself, so a request that is not valid protobuf gets a real answer
// (INVALID_ARGUMENT naming the message type) instead of gRPC's UNIMPLEMENTED
// with no message, and reaches the service's metrics.
#ifndef RANKD_SERVER_RAW_MESSAGES_H_
#define RANKD_SERVER_RAW_MESSAGES_H_

#include <cstddef>

#include "absl/status/status.h"
#include "google/protobuf/arena.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"

namespace rankd::server {

// Parses `wire` into `message` (cleared first) and empties `wire` (its
// slices are released at once: the parsed message holds the data now).
// INVALID_ARGUMENT "request is not a valid <full type name>" when the bytes
// are not a valid serialization of it (bad wire format, truncated, a string
// field that is not UTF-8), with what protobuf reports, cut short.
absl::Status ParseRequest(grpc::ByteBuffer* wire, google::protobuf::Message* message);

// Memory for one call's messages (a KServe call's request and response, a
// Score call's response): a protobuf arena that starts in a block inside the
// object. A message on the heap makes a heap allocation for each of its
// sub-messages, strings and arrays, each freed later, often on another
// thread; on the arena they are carved from a few blocks, all freed at once
// with the call. (Score's requests come from a MessagePool instead: an arena
// keeps every block a growing array left behind, which the in-flight byte
// budget would have to count.)
// The messages live as long as the CallArena (their destructors are not
// run: the arena frees their memory). Creating messages is thread-safe;
// each message is as thread-safe as any protobuf message.
class CallArena {
 public:
  // Bytes inside the object: a small request and its response need no heap
  // block at all.
  static constexpr size_t kFirstBlockBytes = 4096;

  CallArena() : arena_(first_block_, kFirstBlockBytes) {}
  CallArena(const CallArena&) = delete;
  CallArena& operator=(const CallArena&) = delete;

  template <typename Message>
  Message* Create() {
    return google::protobuf::Arena::CreateMessage<Message>(&arena_);
  }

 private:
  alignas(16) char first_block_[kFirstBlockBytes];
  google::protobuf::Arena arena_;
};

// Serializes `message` into `wire` (replacing what it held). INTERNAL when
// it cannot be serialized (over 2 GiB).
absl::Status SerializeResponse(const google::protobuf::Message& message, grpc::ByteBuffer* wire);

}  // namespace rankd::server

#endif  // RANKD_SERVER_RAW_MESSAGES_H_
