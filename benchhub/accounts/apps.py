from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "benchhub.accounts"
    label = "accounts"
