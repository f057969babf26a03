// The transport-security flags of rankd's client tools (rankctl and
// rankload): --tls_ca_file, --tls_cert_file, --tls_key_file and
// --token_file, defined once here for every binary that links this library.
// What they mean and how they are checked: client/tls.h (LoadSecurity).
#ifndef RANKD_CLIENT_SECURITY_FLAGS_H_
#define RANKD_CLIENT_SECURITY_FLAGS_H_

#include "client/tls.h"

namespace rankd::client {

// The four flags as given ("" where not given); nothing is read or checked
// yet (LoadSecurity does that). Call after absl::ParseCommandLine.
SecurityFiles SecurityFilesFromFlags();

}  // namespace rankd::client

#endif  // RANKD_CLIENT_SECURITY_FLAGS_H_
