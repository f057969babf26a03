// Version of this build, reported by rankd_build_info and `rankd version`.
#ifndef RANKD_SERVER_BUILD_INFO_H_
#define RANKD_SERVER_BUILD_INFO_H_

namespace rankd::server {

inline constexpr char kRankdVersion[] = "0.1.0";

}  // namespace rankd::server

#endif  // RANKD_SERVER_BUILD_INFO_H_
