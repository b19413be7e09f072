from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "hub.accounts"
    label = "accounts"
