"""The shop's URLs: enqueue views and result views."""

from django.urls import path
from shop import views

urlpatterns = [
    path("add", views.enqueue_add),
    path("add-later", views.enqueue_add_later),
    path("refund", views.enqueue_refund),
    path("deliver", views.enqueue_deliver),
    path("render", views.enqueue_render),
    path("forget", views.enqueue_forget),
    path("greet", views.enqueue_greet),
    path("count", views.enqueue_count),
    path("rendezvous", views.enqueue_rendezvous),
    path("whoami", views.enqueue_whoami),
    path("mark", views.enqueue_mark),
    path("result/<str:result_id>", views.result),
    path("aresult/<str:result_id>", views.aresult),
    path("ranked-result/<str:result_id>", views.ranked_result),
]
