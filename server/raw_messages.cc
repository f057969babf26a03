#include "server/raw_messages.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "engine/model/error_text.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/support/proto_buffer_reader.h"

namespace rankd::server {

absl::Status ParseRequest(grpc::ByteBuffer* wire, google::protobuf::Message* message) {
  message->Clear();
  bool parsed = false;
  std::string why;
  {
    grpc::ProtoBufferReader reader(wire);
    if (reader.status().ok()) {
      parsed = message->ParseFromZeroCopyStream(&reader);
    } else {
      why = reader.status().error_message();
    }
  }
  wire->Clear();
  if (parsed) return absl::OkStatus();
  // Required fields (none in proto3) are all protobuf could name.
  if (why.empty()) why = message->InitializationErrorString();
  return absl::InvalidArgumentError(
      absl::StrCat("request is not a valid ", message->GetDescriptor()->full_name(),
                   why.empty() ? "" : absl::StrCat(" (", engine::TruncateForError(why), ")")));
}

absl::Status SerializeResponse(const google::protobuf::Message& message, grpc::ByteBuffer* wire) {
  bool own_buffer = false;
  grpc::Status s =
      grpc::SerializationTraits<google::protobuf::Message>::Serialize(message, wire, &own_buffer);
  if (!s.ok()) {
    return absl::InternalError(absl::StrCat("cannot serialize the ",
                                            message.GetDescriptor()->full_name(), ": ",
                                            engine::TruncateForError(s.error_message())));
  }
  return absl::OkStatus();
}

}  // namespace rankd::server
