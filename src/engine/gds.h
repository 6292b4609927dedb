/* GPUDirect Storage through cuFile (FT_NVME_TRANSFER_MODE=cufile), for
 * the NVMe tier (offload_disk.c): libcufile is loaded at run time, so the
 * library neither links it nor needs its header.  Opened on a file (its
 * O_DIRECT descriptor), its entry points found with lookup (the real
 * dlsym: the library's own would recurse): 0, or -1 with why (no libcufile, its driver does
 * not open, nvidia-fs is absent so cuFile would only read through host
 * memory in its compatibility mode, the file is refused).  A GPU buffer
 * registered: 0, or -1 (unregistered, cuFile would read through buffers
 * of its own); n bytes at off of the file into dst (0, or -1 with errno);
 * closed.  Every call into cuFile passes its driver calls through the
 * hooks untouched (ft/passthrough.h). */
#ifndef FT_GDS_H
#define FT_GDS_H

#include <stddef.h>
#include <stdint.h>

#include "ft/cuda.h"

struct ft_gds {
	void *lib;
	void *fh;                           /* CUfileHandle_t */
	int opened;                         /* cuFileDriverOpen succeeded */
	int shared;                         /* the program had loaded libcufile */
	struct ft_gds_fns *f;
};

int ft_gds_open(struct ft_gds *g, int fd, void *(*lookup)(void *, const char *), char *why,
		size_t len);
int ft_gds_register(struct ft_gds *g, CUdeviceptr p, size_t n);
void ft_gds_unregister(struct ft_gds *g, CUdeviceptr p);
int ft_gds_read(struct ft_gds *g, CUdeviceptr dst, size_t n, uint64_t off);
void ft_gds_close(struct ft_gds *g);

#endif
