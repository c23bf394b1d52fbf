package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/web/templates"
)

func overview(d Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		nodes, err := d.Cache.Nodes.List(labels.Everything())
		if err != nil {
			return err
		}
		var ov kueue.Overview
		queues, err := d.Cache.ClusterQueues.List(labels.Everything())
		if err != nil {
			return err
		}
		ov = kueue.BuildOverview(nodes, queues)
		return render(c, http.StatusOK, templates.Overview(templates.OverviewView{
			Page:     templates.Page{Title: "Cluster overview", Active: "overview", Problem: problem(d.Cache)},
			Overview: ov,
		}))
	}
}
