/* migrations.h - the schema, as numbered migrations compiled into labd.
 * Migration i (1-based) moves the schema from version i-1 to i. Never edit a
 * released migration: append a new one. */
#ifndef LABD_MIGRATIONS_H
#define LABD_MIGRATIONS_H

/* The number of migrations; migrations_sql(i) for 1 <= i <= count. */
int migrations_count(void);
const char *migrations_sql(int version);

#endif
