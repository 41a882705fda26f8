#ifndef INCOLL_TOOLS_MPIRUN_LAYER_H
#define INCOLL_TOOLS_MPIRUN_LAYER_H

/*
 * How `incoll mpirun` brings incoll into the ranks (tools/mpirun_layer.c):
 * Open MPI's collective component coll/incoll, or the PMPI layer
 * libincoll_mpi preloaded.
 */
#include <stddef.h>

typedef enum {
    MPIRUN_LAYER_AUTO,
    MPIRUN_LAYER_COMPONENT,
    MPIRUN_LAYER_PMPI,
} mpirun_layer_t;

/* "auto", "component" or "pmpi" into *out; 0, or -1 for another word. */
int mpirun_layer_parse(const char *word, mpirun_layer_t *out);

typedef struct {
    mpirun_layer_t layer; /* COMPONENT or PMPI */
    /* For the component: Open MPI's component path followed by the
     * directory of ours (mca_base_component_path), empty when it is
     * installed in Open MPI's own directory. */
    char path[2 * 4096 + 8];
    char why[512]; /* why this layer, for the one line on stderr */
} mpirun_layer_choice_t;

/*
 * Chooses the layer for a job: want as asked (--layer), mpich for --mpi
 * mpich, lib_given when --lib or --no-preload named the PMPI layer. auto
 * takes the component when it was built, is found, and the running Open
 * MPI (`mpirun --version`) has the major.minor it was built against; the
 * PMPI layer otherwise. 0, or -1 when the component was asked for and
 * cannot be used (the cause in c->why).
 */
int mpirun_layer_choose(mpirun_layer_t want, int mpich, int lib_given,
                        mpirun_layer_choice_t *c);

#endif
