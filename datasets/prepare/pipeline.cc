#include "datasets/prepare/pipeline.h"

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "datasets/prepare/prepare.h"

namespace parity::datasets {
namespace {

// ~4 MiB of text a batch: large enough to amortise the hand-offs, small enough that 2·threads + 2
// of them stay well under a gigabyte on any machine.
constexpr int64_t kBatchBytes = int64_t{4} << 20;
constexpr size_t kBatchPieces = 8192;

struct TokenizedPiece {
  bool held_out = false;
  bool starts_document = true;
  bool skipped = false;  // an empty JSON Lines text
  std::vector<uint32_t> ids;
  int64_t text_bytes = 0;
  int64_t token_bytes = 0;
};

struct Batch {
  int64_t sequence = 0;
  int64_t bytes_read = 0;  // the reader's count once this batch was cut
  std::vector<TextPiece> pieces;
  absl::Status status;
  std::vector<TokenizedPiece> out;
  bool last = false;  // the reader's final batch (maybe empty)
};

// Batches between the threads. `in_flight` counts batches cut and not yet written.
class BatchQueue {
 public:
  explicit BatchQueue(int64_t max_in_flight) : max_in_flight_(max_in_flight) {}

  // Reader: waits for room; false once stopped.
  bool Push(std::unique_ptr<Batch> batch) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return stopped_ || in_flight_ < max_in_flight_; });
    if (stopped_) return false;
    ++in_flight_;
    todo_.push_back(std::move(batch));
    cv_.notify_all();
    return true;
  }
  // Worker: the next batch to tokenize; null once stopped or drained.
  std::unique_ptr<Batch> Take() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return stopped_ || !todo_.empty() || reader_done_; });
    if (stopped_ || todo_.empty()) return nullptr;
    std::unique_ptr<Batch> batch = std::move(todo_.front());
    todo_.pop_front();
    return batch;
  }
  void Done(std::unique_ptr<Batch> batch) {
    std::lock_guard lock(mu_);
    const int64_t sequence = batch->sequence;
    done_[sequence] = std::move(batch);
    cv_.notify_all();
  }
  // Writer: the batch with this sequence number, in order; null once stopped.
  std::unique_ptr<Batch> Next(int64_t sequence) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return stopped_ || done_.count(sequence) > 0; });
    if (stopped_) return nullptr;
    std::unique_ptr<Batch> batch = std::move(done_[sequence]);
    done_.erase(sequence);
    --in_flight_;
    cv_.notify_all();
    return batch;
  }
  void ReaderDone() {
    std::lock_guard lock(mu_);
    reader_done_ = true;
    cv_.notify_all();
  }
  void Stop() {
    std::lock_guard lock(mu_);
    stopped_ = true;
    cv_.notify_all();
  }

 private:
  const int64_t max_in_flight_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Batch>> todo_;
  std::map<int64_t, std::unique_ptr<Batch>> done_;
  int64_t in_flight_ = 0;
  bool reader_done_ = false;
  bool stopped_ = false;
};

void ReadBatches(DocumentReader& reader, BatchQueue& queue) {
  int64_t sequence = 0;
  for (;;) {
    auto batch = std::make_unique<Batch>();
    batch->sequence = sequence++;
    int64_t bytes = 0;
    while (bytes < kBatchBytes && batch->pieces.size() < kBatchPieces) {
      TextPiece piece;
      absl::StatusOr<bool> more = reader.Next(piece);
      if (!more.ok()) {
        batch->status = more.status();
        batch->last = true;
        break;
      }
      if (!*more) {
        batch->last = true;
        break;
      }
      bytes += static_cast<int64_t>(piece.text.size());
      batch->pieces.push_back(std::move(piece));
    }
    batch->bytes_read = reader.bytes_read();
    const bool last = batch->last;
    if (!queue.Push(std::move(batch)) || last) break;
  }
  queue.ReaderDone();
}

absl::Status TokenizeBatch(Batch& batch, const DocumentReader& reader,
                           const TextTokenizer& tokenizer, const InputOptions& input,
                           const SplitRule* rule) {
  const Tokenizer& description = tokenizer.description();
  batch.out.resize(batch.pieces.size());
  for (size_t i = 0; i < batch.pieces.size(); ++i) {
    const TextPiece& piece = batch.pieces[i];
    TokenizedPiece& out = batch.out[i];
    out.starts_document = piece.starts_document;
    out.held_out = rule != nullptr && IsValidationDocument(*rule, piece.document);
    std::string parsed;
    if (piece.jsonl) {
      absl::StatusOr<std::string> text = ExtractJsonlText(
          piece, reader.files()[static_cast<size_t>(piece.file)].path, input.text_field);
      if (!text.ok()) return text.status();
      parsed = *std::move(text);
      if (parsed.empty()) {
        out.skipped = true;
        continue;
      }
    }
    const std::string& text = piece.jsonl ? parsed : piece.text;
    absl::Status encoded = tokenizer.Encode(text, out.ids);
    if (!encoded.ok()) return encoded;
    if (piece.ends_document && description.eos_id >= 0) {
      out.ids.push_back(static_cast<uint32_t>(description.eos_id));
    }
    out.text_bytes = static_cast<int64_t>(text.size());
    for (const uint32_t id : out.ids) out.token_bytes += description.token_bytes[id];
  }
  return absl::OkStatus();
}

absl::Status WriteBatch(const Batch& batch, const PipelineSinks& sinks, PipelineStats& stats) {
  for (const TokenizedPiece& piece : batch.out) {
    if (piece.skipped) {
      ++stats.empty_documents;
      continue;
    }
    ShardWriter* writer = piece.held_out ? sinks.held_out : sinks.primary;
    Split* counts = piece.held_out ? sinks.held_out_counts : sinks.primary_counts;
    if (piece.starts_document) {
      writer->BeginDocument();
      ++stats.documents;
    }
    absl::Status appended = writer->Append(piece.ids.data(), piece.ids.size());
    if (!appended.ok()) return appended;
    counts->text_bytes += piece.text_bytes;
    counts->token_bytes += piece.token_bytes;
    stats.tokens += static_cast<int64_t>(piece.ids.size());
  }
  stats.bytes_read = batch.bytes_read;
  return absl::OkStatus();
}

}  // namespace

absl::Status RunPipeline(DocumentReader& reader, const TextTokenizer& tokenizer,
                         const InputOptions& input, const PipelineSinks& sinks, int threads,
                         const std::function<void(const PipelineStats&)>& on_batch,
                         PipelineStats& stats) {
  BatchQueue queue(2 * static_cast<int64_t>(threads) + 2);
  std::vector<std::thread> pool;
  pool.emplace_back([&] { ReadBatches(reader, queue); });
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      while (std::unique_ptr<Batch> batch = queue.Take()) {
        if (batch->status.ok()) {
          batch->status = TokenizeBatch(*batch, reader, tokenizer, input, sinks.rule);
        }
        queue.Done(std::move(batch));
      }
    });
  }
  absl::Status status;
  for (int64_t sequence = 0;; ++sequence) {
    std::unique_ptr<Batch> batch = queue.Next(sequence);
    status = batch->status.ok() ? WriteBatch(*batch, sinks, stats) : batch->status;
    if (!status.ok() || batch->last) break;
    if (on_batch) on_batch(stats);
  }
  if (status.ok() && on_batch) on_batch(stats);
  queue.Stop();
  for (std::thread& thread : pool) thread.join();
  return status;
}

}  // namespace parity::datasets
