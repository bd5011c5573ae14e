package concurrency

import (
	"gorm.io/gorm"
)

// Plugin installs the optimistic-concurrency callbacks: db.Use(concurrency.Plugin{}).
type Plugin struct{}

// Name identifies the plugin to GORM.
func (Plugin) Name() string { return "keelson:concurrency" }

// Initialize registers the callbacks; each keeps GORM's own order (see the package doc).
func (Plugin) Initialize(db *gorm.DB) error {
	p := &plugin{}
	cb := db.Callback()
	steps := []error{
		cb.Query().Before("gorm:query").Register("concurrency:select_version", p.selectVersion),
		cb.Query().After("gorm:query").Before("gorm:preload").Register("concurrency:remember_read", p.rememberRead),

		cb.Create().After("gorm:save_before_associations").Before("gorm:create").Register("concurrency:refuse_upsert", p.refuseUpsert),
		cb.Create().After("gorm:create").Before("gorm:save_after_associations").Register("concurrency:remember_created", p.rememberCreated),

		cb.Update().After("gorm:save_before_associations").Before("gorm:update").Register("concurrency:guard_update", p.guardUpdate),
		cb.Update().After("gorm:update").Before("gorm:save_after_associations").Register("concurrency:check_update", p.checkUpdate),

		cb.Delete().After("gorm:delete_before_associations").Before("gorm:delete").Register("concurrency:guard_delete", p.guardDelete),
		cb.Delete().After("gorm:delete").Before("gorm:after_delete").Register("concurrency:check_delete", p.checkDelete),
	}
	for _, err := range steps {
		if err != nil {
			return err
		}
	}
	return nil
}

type plugin struct{ models models }
