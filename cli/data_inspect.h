// `parity data digest|inspect`: what a prepared dataset is, read from its manifest.
#pragma once

#include <string>

#include "CLI/CLI.hpp"
#include "datasets/format/manifest.h"

namespace parity::cli {

// A human summary: name, path, digest, tokenizer, then one row per split (tokens, documents,
// text and token bytes, shards).
std::string DescribeManifest(const datasets::Manifest& manifest, const std::string& digest,
                             const std::string& path);

// `digest DIR` (the manifest's SHA-256: what a sweep pins as data.dataset_digest) and
// `inspect DIR [--verify]` under `parity data`.
void RegisterDataInspectCommands(CLI::App& data, int& exit_code);

}  // namespace parity::cli
