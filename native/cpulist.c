/* CPU lists as the kernel writes and accepts them (Documentation/admin-guide/
 * kernel-parameters.rst, "cpu lists"): comma-separated items, each a number,
 * a range "a-b", or a grouped range "a-b:used/group" that takes the first
 * `used` CPUs of every `group`. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"

static int read_num(const char **p, unsigned long *out)
{
    if (!isdigit((unsigned char)**p))
        return -1;
    char *end;
    errno = 0;
    unsigned long v = strtoul(*p, &end, 10);
    if (errno || v >= CPU_SETSIZE)
        return -1;
    *p = end;
    *out = v;
    return 0;
}

static int parse_item(const char **p, cpu_set_t *out)
{
    unsigned long a, b, used = 1, group = 1;
    if (read_num(p, &a))
        return -1;
    b = a;
    if (**p == '-') {
        (*p)++;
        if (read_num(p, &b) || b < a)
            return -1;
        if (**p == ':') {
            (*p)++;
            if (read_num(p, &used) || **p != '/')
                return -1;
            (*p)++;
            if (read_num(p, &group) || group == 0 || used == 0 || used > group)
                return -1;
        }
    }
    for (unsigned long c = a; c <= b; c++)
        if ((c - a) % group < used)
            CPU_SET(c, out);
    return 0;
}

int cpulist_parse(const char *text, cpu_set_t *out)
{
    CPU_ZERO(out);
    const char *p = text;
    if (!*p)
        return -1;
    for (;;) {
        if (parse_item(&p, out))
            return -1;
        if (*p == '\0')
            return 0;
        if (*p != ',')
            return -1;
        p++;
    }
}

void cpulist_format(const cpu_set_t *set, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, set))
            continue;
        int end = c;
        while (end + 1 < CPU_SETSIZE && CPU_ISSET(end + 1, set))
            end++;
        int n = end > c ? snprintf(buf + used, len - used, "%s%d-%d", used ? "," : "", c, end)
                        : snprintf(buf + used, len - used, "%s%d", used ? "," : "", c);
        if (n < 0 || (size_t)n >= len - used)
            return; /* truncated; still NUL-terminated */
        used += (size_t)n;
        c = end;
    }
}

void json_cpuset(json_t *j, const cpu_set_t *set)
{
    json_arr_begin(j);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, set))
            json_u64(j, (uint64_t)c);
    json_arr_end(j);
}
