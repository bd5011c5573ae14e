package database

import "database/sql"

// GenericPlansPool is, for tests, the pool of WithGenericPlans (nil when the budget left none).
func (d *DB) GenericPlansPool() *sql.DB { return d.genericSQL }
