/* Unit tests of the native core's pure parts: the histogram layout, CPU list
 * parsing and JSON escaping. Built and run by test_native_units.py. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hist.h"
#include "json.h"
#include "probe.h"

static int failures;
#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                    \
        }                                                                  \
    } while (0)

static void check_value(uint64_t v)
{
    unsigned i = hist_index(v);
    CHECK(i < HIST_BUCKETS);
    CHECK(hist_lower(i) <= v);
    CHECK(v - hist_lower(i) < hist_width(i));
    /* Relative bucket width is bounded by 2^-SUB above the exact range. */
    if (v >= 2 * HIST_SUBCOUNT)
        CHECK(hist_width(i) * HIST_SUBCOUNT <= hist_lower(i));
}

static void test_hist(void)
{
    for (uint64_t v = 0; v < 100000; v++)
        check_value(v);
    for (int b = 0; b < 64; b++) {
        uint64_t p = (uint64_t)1 << b;
        check_value(p);
        check_value(p - 1);
        check_value(p + 1);
    }
    check_value(UINT64_MAX);
    /* Buckets tile the number line: each starts where the last one ended. */
    for (unsigned i = 1; i < HIST_BUCKETS; i++)
        CHECK(hist_lower(i) == hist_lower(i - 1) + hist_width(i - 1));
    CHECK(hist_index(UINT64_MAX) == HIST_BUCKETS - 1);
}

static void test_cpulist(void)
{
    cpu_set_t s;
    char buf[128];
    CHECK(cpulist_parse("0-3,8-11", &s) == 0 && CPU_COUNT(&s) == 8 && CPU_ISSET(9, &s));
    CHECK(cpulist_parse("0-31:2/8", &s) == 0 && CPU_COUNT(&s) == 8 && CPU_ISSET(25, &s) && !CPU_ISSET(26, &s));
    cpulist_format(&s, buf, sizeof buf);
    CHECK(strcmp(buf, "0-1,8-9,16-17,24-25") == 0);
    const char *bad[] = {"", "1-", "-1", "3-1", "1,,2", "a", "0-7:0/4", "0-7:5/4", "99999", NULL};
    for (int i = 0; bad[i]; i++)
        CHECK(cpulist_parse(bad[i], &s) != 0);
}

static void test_json(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    json_t j;
    json_init(&j, mem);
    json_obj_begin(&j);
    json_kv_str(&j, "s", "a\"b\\c\n\x01");
    json_key(&j, "a");
    json_arr_begin(&j);
    json_u64(&j, 1);
    json_f64(&j, 0.0 / 0.0);
    json_bool(&j, 1);
    json_arr_end(&j);
    json_obj_end(&j);
    fclose(mem);
    CHECK(strcmp(text, "{\"s\":\"a\\\"b\\\\c\\n\\u0001\",\"a\":[1,null,true]}") == 0);
    free(text);
}

int main(void)
{
    test_hist();
    test_cpulist();
    test_json();
    if (failures)
        fprintf(stderr, "%d failed\n", failures);
    else
        printf("all native unit checks passed\n");
    return failures ? 1 : 0;
}
