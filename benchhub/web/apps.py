from django.apps import AppConfig


class WebConfig(AppConfig):
    name = "benchhub.web"
    label = "web"
