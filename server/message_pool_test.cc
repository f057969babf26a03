#include "server/message_pool.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "google/protobuf/unknown_field_set.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "gtest/gtest.h"
#include "rankd/v1/ranking.pb.h"
#include "server/raw_messages.h"

namespace rankd::server {
namespace {

using Pool = MessagePool<rankd::v1::ScoreRequest>;

rankd::v1::ScoreRequest MakeRequest(const std::string& model, int candidates, int features,
                                    bool weighted) {
  rankd::v1::ScoreRequest r;
  r.set_model(model);
  r.set_num_candidates(candidates);
  for (int i = 0; i < candidates * 3; ++i) r.add_dense(0.5f * i);
  for (int f = 0; f < features; ++f) {
    rankd::v1::SparseFeature* s = r.add_sparse();
    s->set_name("f" + std::to_string(f));
    for (int i = 0; i < candidates; ++i) {
      s->add_lengths(1);
      s->add_ids(i * 7 + f);
      if (weighted) s->add_weights(1.0f + i);
    }
  }
  return r;
}

// Parses `r`'s wire bytes into `into`, as a Score call does.
void Reparse(const rankd::v1::ScoreRequest& r, rankd::v1::ScoreRequest* into) {
  const std::string bytes = r.SerializeAsString();
  grpc::Slice slice(bytes);
  grpc::ByteBuffer wire(&slice, 1);
  ASSERT_TRUE(ParseRequest(&wire, into).ok());
}

TEST(MessagePoolTest, AMessageGivenBackIsTakenAgain) {
  Pool pool(Pool::Options{});
  std::unique_ptr<rankd::v1::ScoreRequest> m = pool.Take();
  ASSERT_NE(m, nullptr);
  rankd::v1::ScoreRequest* kept = m.get();
  pool.Give(std::move(m), 100);
  EXPECT_EQ(pool.kept(), 1);
  EXPECT_EQ(pool.Take().get(), kept);
  EXPECT_EQ(pool.kept(), 0);
  EXPECT_NE(pool.Take(), nullptr);  // empty: a new one
  pool.Give(nullptr, 0);            // nothing to keep
  EXPECT_EQ(pool.kept(), 0);
}

TEST(MessagePoolTest, KeepsNoMoreMessagesThanItsBoundNorLargerOnes) {
  Pool::Options options;
  options.max_messages = 2;
  options.max_message_bytes = 1000;
  Pool pool(options);
  for (int i = 0; i < 3; ++i) pool.Give(std::make_unique<rankd::v1::ScoreRequest>(), 10);
  EXPECT_EQ(pool.kept(), 2);
  Pool small(options);
  small.Give(std::make_unique<rankd::v1::ScoreRequest>(), 1000);
  small.Give(std::make_unique<rankd::v1::ScoreRequest>(), 1001);
  EXPECT_EQ(small.kept(), 1);
  for (const int none : {0, -1}) {
    options.max_messages = none;
    Pool off(options);
    off.Give(std::make_unique<rankd::v1::ScoreRequest>(), 1);
    EXPECT_EQ(off.kept(), 0) << none;
  }
}

// What the pool is for: a request parsed into a message given back keeps
// its arrays (no allocation for the same shape), and nothing of an earlier
// request shows through in a later one of another shape.
TEST(MessagePoolTest, AReusedMessageKeepsItsArraysAndNothingOfItsLastRequest) {
  Pool pool(Pool::Options{});
  const rankd::v1::ScoreRequest big = MakeRequest("a", 300, 4, /*weighted=*/true);
  std::unique_ptr<rankd::v1::ScoreRequest> m = pool.Take();
  Reparse(big, m.get());
  const int64_t* ids = m->sparse(3).ids().data();
  pool.Give(std::move(m), 100);

  m = pool.Take();
  Reparse(big, m.get());
  EXPECT_EQ(m->sparse(3).ids().data(), ids) << "the same shape reallocated its ids";
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*m, big));

  for (const rankd::v1::ScoreRequest& other :
       {MakeRequest("b", 2, 1, /*weighted=*/false), rankd::v1::ScoreRequest(),
        MakeRequest("c", 5, 6, /*weighted=*/true)}) {
    pool.Give(std::move(m), 100);
    m = pool.Take();
    Reparse(other, m.get());
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*m, other))
        << m->ShortDebugString();
  }
}

// A message is kept cleared: a request's unknown fields (which the holder's
// size does not count) and data do not stay in the pool until the next parse.
TEST(MessagePoolTest, AKeptMessageHoldsNothingOfItsRequestNotEvenUnknownFields) {
  Pool pool(Pool::Options{});
  rankd::v1::ScoreRequest with_unknown = MakeRequest("a", 3, 2, /*weighted=*/false);
  with_unknown.mutable_sparse(1)->GetReflection()->MutableUnknownFields(
      with_unknown.mutable_sparse(1))->AddLengthDelimited(999, std::string(100000, 'x'));
  with_unknown.GetReflection()->MutableUnknownFields(&with_unknown)
      ->AddLengthDelimited(998, std::string(100000, 'y'));
  std::unique_ptr<rankd::v1::ScoreRequest> m = pool.Take();
  Reparse(with_unknown, m.get());
  ASSERT_GT(m->ByteSizeLong(), 200000u);
  pool.Give(std::move(m), 100);
  m = pool.Take();
  EXPECT_EQ(m->ByteSizeLong(), 0u) << "a kept message still held its last request";
  EXPECT_EQ(m->sparse_size(), 0);
}

TEST(MessagePoolTest, ThreadsTakeAndGiveAtOnce) {
  Pool::Options options;
  options.max_messages = 4;
  Pool pool(options);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&pool, t] {
      for (int i = 0; i < 2000; ++i) {
        std::unique_ptr<rankd::v1::ScoreRequest> m = pool.Take();
        m->set_num_candidates(t);
        pool.Give(std::move(m), 1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_LE(pool.kept(), 4);
  EXPECT_GE(pool.kept(), 1);
}

}  // namespace
}  // namespace rankd::server
