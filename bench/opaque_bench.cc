// Opaque ids: FF1 (include/sekka/ff1.h) over 63 and 53 bits, one id per call, as
// `format=opaque` will use it. The budget is 300 ns per id on one core.
//
//   build-bench/bench/opaque_bench --benchmark_repetitions=5

#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "sekka/ff1.h"
#include "sekka/opaque.h"

namespace {

std::unique_ptr<sekka::Ff1> Key() {
  const std::vector<std::uint8_t> key(16, 0x5a);
  return std::move(sekka::Ff1::Create(key)).value();
}

void BM_Ff1EncryptBits(benchmark::State& state) {
  auto f = Key();
  const int bits = static_cast<int>(state.range(0));
  std::uint64_t x = 250'000'000'000'000'000ull & ((1ull << bits) - 1);
  for (auto _ : state) {
    benchmark::DoNotOptimize(f->EncryptBits(x++, bits));
  }
}
BENCHMARK(BM_Ff1EncryptBits)->Arg(63)->Arg(53);

void BM_Ff1DecryptBits(benchmark::State& state) {
  auto f = Key();
  const int bits = static_cast<int>(state.range(0));
  std::uint64_t x = 12345;
  for (auto _ : state) {
    benchmark::DoNotOptimize(f->DecryptBits(x++, bits));
  }
}
BENCHMARK(BM_Ff1DecryptBits)->Arg(63)->Arg(53);

// What format=opaque pays: OpaqueCodec with the layout's tweak (about 60 bytes: Q spans four
// AES blocks, three of them the same in every round), numeric and text forms.
std::unique_ptr<sekka::OpaqueCodec> Codec() {
  return std::move(sekka::OpaqueCodec::Create(
                       *sekka::ParseOpaqueKeys("a 5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a\n"),
                       sekka::Layout::Default()))
      .value();
}

void BM_OpaqueEncode(benchmark::State& state) {
  auto c = Codec();
  sekka::Id x = 250'000'000'000'000'000;
  for (auto _ : state) benchmark::DoNotOptimize(c->Encode(x++));
}
BENCHMARK(BM_OpaqueEncode);

void BM_OpaqueEncodeText(benchmark::State& state) {
  auto c = Codec();
  sekka::Id x = 250'000'000'000'000'000;
  for (auto _ : state) benchmark::DoNotOptimize(c->EncodeText(x++));
}
BENCHMARK(BM_OpaqueEncodeText);

void BM_OpaqueDecodeText(benchmark::State& state) {
  auto c = Codec();
  const std::string text = *c->EncodeText(250'000'000'000'000'000);
  for (auto _ : state) benchmark::DoNotOptimize(c->DecodeText(text));
}
BENCHMARK(BM_OpaqueDecodeText);

}  // namespace

BENCHMARK_MAIN();
