/*
 * libFuzzer harness of the topology parser: the input goes to an
 * in-memory file that topo_load() reads by its /proc/self/fd name, and to
 * topo_parse(); the properties are those of the unit test fuzz_topo
 * (tests/fuzz/fuzz_check.h). Build and run: docs/fuzzing.md.
 */
#define FUZZ_SEED fuzz_topo_seed
#define FUZZ_CHECK fuzz_check_topo
#define FUZZ_CORPUS "topo"
#define FUZZ_SCRATCH "topology"
#include "fuzz_text_file.h"
