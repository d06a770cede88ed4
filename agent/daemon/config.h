/* perfmapd's config file: KEY = VALUE lines, root's alone, applied through the options' table. */
#ifndef PERFMAPD_CONFIG_H
#define PERFMAPD_CONFIG_H

#include <stddef.h>

#include "daemon/daemon_config.h"

/* Larger config files are refused: a few dozen lines are all there is to say. */
#define CONFIG_MAX_BYTES (64u << 10)

/*
 * Read cfg->config_path and apply each of its options that the command
 * line (cfg->cmdline_set) did not give. The file must be a regular file
 * owned by root and writable by no one else: the agent runs as root. A
 * missing file is fine unless cfg->config_explicit. 0, or a negative errno
 * with what is wrong in @err ("FILE:LINE: ..."), and then @cfg is unchanged.
 */
int config__load(struct daemon_config *cfg, char *err, size_t errlen);
/*
 * The text of a config file (@path, for messages) into @cfg, as
 * config__load() does after its checks; @text is split into lines in
 * place, and @cfg points into it. 0 or -EINVAL with @err; @cfg unchanged then.
 */
int config__parse(struct daemon_config *cfg, const char *path, char *text, char *err, size_t errlen);
/* Free the file's text that config__load() kept; @cfg's values from it go with it. */
void config__free(struct daemon_config *cfg);

#endif /* PERFMAPD_CONFIG_H */
