from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "benchhub.api"
    label = "api"
