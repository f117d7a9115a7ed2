package dev_test

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

func metav1ListOptions() metav1.ListOptions { return metav1.ListOptions{} }
